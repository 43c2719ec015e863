//! Go durations (`?timeout=`, flags) and resource quantities (the typed decoder's check and
//! CEL's `quantity()` library, two readers of one grammar).

use std::sync::{Arc, OnceLock};

use kapi_apiextensions::cel::{
    Activation, Declarations, Evaluator, Expression, ExpressionCompiler, Input, ReturnType, RUNTIME_CEL_COST_BUDGET,
};
use kapi_apimachinery::time::parse_go_duration;
use serde_json::json;

/// A Go duration. Asserts: a parsed duration fits Go's `time.Duration` (int64 nanoseconds,
/// about 292 years: Go refuses longer ones); printed as nanoseconds it parses back to the same
/// duration (within float rounding); refusals carry Go's `time: ` texts.
pub fn go_duration(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    match parse_go_duration(text) {
        Ok(Some(d)) => {
            let nanos = d.as_nanos();
            assert!(nanos <= i64::MAX as u128, "{text:?} is {d:?}, beyond Go's time.Duration");
            let again = parse_go_duration(&format!("{nanos}ns")).ok().flatten().map(|d| d.as_nanos());
            let close = again.is_some_and(|a| a.abs_diff(nanos) <= nanos / 1_000_000_000_000 + 2);
            assert!(close, "{text:?} is {nanos}ns, which reads back as {again:?}");
        }
        Ok(None) => assert!(text.starts_with('-'), "{text:?} read as negative"),
        Err(e) => assert!(e.to_string().starts_with("time: "), "{e}"),
    }
}

/// The CEL expressions the quantity target evaluates on `object.q`.
struct QuantityExprs {
    is_quantity: Expression,
    arithmetic: Expression,
}

fn quantity_exprs() -> &'static QuantityExprs {
    static EXPRS: OnceLock<QuantityExprs> = OnceLock::new();
    EXPRS.get_or_init(|| {
        let compiler = ExpressionCompiler::new();
        let compile = |e: &str| {
            compiler
                .compile(e, ReturnType::Bool, Declarations::default())
                .unwrap_or_else(|err| panic!("{e} does not compile: {err}"))
        };
        QuantityExprs {
            is_quantity: compile("isQuantity(object.q)"),
            arithmetic: compile(
                "quantity(object.q).add(quantity(object.q)).sub(quantity(object.q)).compareTo(quantity(object.q)) == 0 \
                 && quantity(object.q).sign() == quantity(object.q).compareTo(quantity('0')) \
                 && quantity(object.q).isLessThan(quantity(object.q)) == false",
            ),
        }
    })
}

/// A quantity string. Asserts: the decoder's syntax check (`quantities must match ...`)
/// and CEL's `isQuantity` agree (kube runs one parser for both); on a quantity, CEL's
/// arithmetic is consistent (`q + q - q == q`, `sign` agrees with `compareTo`), or fails with
/// an error rather than a wrong answer.
pub fn quantity(data: &[u8]) {
    let Some(text) = crate::text(data) else { return };
    let decoder = kapi_openapi::check_quantity(text);
    let object = json!({"q": text});
    let exprs = quantity_exprs();
    let evaluate = |expr: &Expression| {
        let activation = Arc::new(Activation::new(&Input { object: Some(&object), ..Input::default() }));
        let mut evaluator = Evaluator::new(activation, Arc::from(Vec::new()), RUNTIME_CEL_COST_BUDGET);
        evaluator.evaluate(expr).ok().and_then(|o| o.as_bool())
    };
    let cel = evaluate(&exprs.is_quantity);
    assert_eq!(cel, Some(decoder.is_ok()), "{text:?}: decoder says {decoder:?}, CEL's isQuantity {cel:?}");
    if decoder.is_ok() {
        assert_ne!(evaluate(&exprs.arithmetic), Some(false), "{text:?}: CEL quantity arithmetic");
    }
}
