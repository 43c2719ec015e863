//! What the typed walks need to know about a schema node (structured-merge-diff's `schema`).

use serde_json::Value;

/// How a list's elements are identified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListType {
    /// The list is one value: whoever sets it owns all of it.
    Atomic,
    /// Scalars identified by their value.
    Set,
    /// Objects identified by these key fields.
    Map(Vec<String>),
}

/// The kind of value a schema node describes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// A string, number, boolean or other leaf (including int-or-string and quantities).
    Scalar,
    /// An object with declared fields; `atomic` (`x-kubernetes-map-type: atomic`) makes it a leaf.
    Struct {
        /// `x-kubernetes-map-type: atomic`.
        atomic: bool,
    },
    /// An object with arbitrary keys (`additionalProperties`).
    Map {
        /// `x-kubernetes-map-type: atomic`.
        atomic: bool,
    },
    /// A list.
    List(ListType),
    /// No type information (RawExtension, preserve-unknown-fields): maps are granular, lists
    /// atomic, as SMD's deduced type.
    Untyped,
}

/// One node of a type schema.
pub trait TypeSchema: Sized + Clone {
    /// What this node is.
    fn shape(&self) -> Shape;
    /// The schema of `name` in a struct or map node, and whether it is a declared struct field
    /// (map entries and unknown fields are not).
    fn field(&self, name: &str) -> (Self, bool);
    /// The element schema of a list node.
    fn items(&self) -> Self;
    /// The default of a key field of this (list element) node, used when an element omits it.
    fn key_default(&self, _key: &str) -> Option<Value> {
        None
    }
    /// The fields that Go always serializes, with the value a typed zero object has: `{}` for
    /// non-pointer structs, `null` for lists and maps without `omitempty`. kube compares typed
    /// objects, so these exist (empty) before anybody sets them.
    fn always_present(&self) -> Vec<(String, Value)> {
        Vec::new()
    }
}

/// A schema without type information, structured-merge-diff's deduced type: every object is
/// a granular map, every list atomic. kube types custom resources of CRDs without a schema
/// this way, and the subtrees a schema leaves open.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Deduced;

impl TypeSchema for Deduced {
    fn shape(&self) -> Shape {
        Shape::Untyped
    }

    fn field(&self, _name: &str) -> (Self, bool) {
        (Deduced, false)
    }

    fn items(&self) -> Self {
        Deduced
    }
}

/// The shape an untyped node takes from its value.
pub(crate) fn effective_shape<S: TypeSchema>(schema: &S, value: Option<&Value>) -> Shape {
    match schema.shape() {
        Shape::Untyped => match value {
            Some(Value::Object(_)) => Shape::Map { atomic: false },
            Some(Value::Array(_)) => Shape::List(ListType::Atomic),
            _ => Shape::Scalar,
        },
        other => other,
    }
}
