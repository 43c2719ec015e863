//! Compilation of the CEL expressions in webhook match conditions and admission policies when
//! they are written (kube's `validateCELCondition`): an expression that does not parse, does
//! not type-check against kube's admission variables, or has the wrong result type is a 422
//! naming it, in the environment the plugins evaluate it with.

use kapi_apiextensions::cel::{CompileError, Declarations, ExpressionCompiler, ReturnType};
use kapi_apimachinery::Cause;
use serde_json::Value;

/// kube's `convertCELErrorToValidationError`.
pub(super) fn cause(path: &str, expression: &str, err: &CompileError) -> Cause {
    if err.internal {
        return Cause { reason: "InternalError".into(), message: format!("{path}: Internal error: {}", err.detail), field: path.into() };
    }
    Cause::invalid(path, &Value::from(expression), &err.detail)
}

/// Compiles `expression` for `path`; the cause when it cannot be used.
pub(super) fn check(compiler: &ExpressionCompiler, path: &str, expression: &str, ret: ReturnType, decls: Declarations) -> Option<Cause> {
    compiler.compile(expression, ret, decls).err().map(|e| cause(path, expression, &e))
}

/// A webhook's (no `params`) or a policy's match condition: a bool.
pub(super) fn match_condition(compiler: &ExpressionCompiler, path: &str, expression: &str, params: bool) -> Option<Cause> {
    check(compiler, path, expression, ReturnType::Bool, Declarations { params, authorizer: true })
}
