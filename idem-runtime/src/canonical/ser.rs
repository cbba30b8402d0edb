//! Canonical JSON straight from a `Serialize` value, without building a
//! `serde_json::Value` first: the write path's fast lane for typed
//! arguments.
//!
//! It covers what argument types are made of — structs, maps with string
//! keys, sequences, options, enums, strings, integers up to 64 bits, floats —
//! and returns [`Unsupported`] for anything where `serde_json::to_value`
//! has rules of its own (non-string map keys, 128-bit integers, raw values);
//! the caller then takes the `Value` path. On the covered part the output is
//! byte for byte `canonical_json(&serde_json::to_value(x))` (a property test
//! checks it).

use std::borrow::Cow;
use std::cmp::Ordering;

use serde::Serialize;
use serde::ser::{self, Impossible};
use smallvec::SmallVec;

use super::primitives::{cmp_utf16, write_f64, write_string as write_string_into};

/// The value needs the general path.
#[derive(Debug)]
pub(crate) struct Unsupported;

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("not covered by the direct canonical writer")
    }
}

impl std::error::Error for Unsupported {}

impl ser::Error for Unsupported {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Unsupported
    }
}

/// Writes the canonical JSON of `value` into `out`, or says it cannot.
pub(crate) fn write_canonical<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), Unsupported> {
    value.serialize(Writer { out })
}

struct Writer<'a> {
    out: &'a mut Vec<u8>,
}

/// An object's members, written into `out` as they come; reordered when it
/// ends unless they came sorted (as struct fields declared in name order
/// do).
struct Object<'a> {
    out: &'a mut Vec<u8>,
    /// Where the first member starts in `out`.
    start: usize,
    /// Each member's name and where its `"name":value` lies in `out`; a
    /// few of them without an allocation (arguments are mostly small
    /// objects, and this is every call's path).
    members: SmallVec<[Member; 4]>,
    /// Whether the names so far came in strictly increasing order.
    sorted: bool,
    pending_key: Option<String>,
    /// For `{variant: {..}}`: close the outer object too.
    variant: bool,
}

struct Member {
    name: Cow<'static, str>,
    start: usize,
    end: usize,
}

impl Object<'_> {
    fn member<T: Serialize + ?Sized>(
        &mut self,
        name: Cow<'static, str>,
        value: &T,
    ) -> Result<(), Unsupported> {
        if let Some(last) = self.members.last() {
            self.out.push(b',');
            if cmp_utf16(&last.name, &name) != Ordering::Less {
                self.sorted = false;
            }
        }
        let start = self.out.len();
        write_string_into(self.out, &name);
        self.out.push(b':');
        value.serialize(Writer { out: self.out })?;
        let end = self.out.len();
        self.members.push(Member { name, start, end });
        Ok(())
    }

    fn finish(mut self) -> Result<(), Unsupported> {
        if !self.sorted {
            self.members
                .sort_unstable_by(|a, b| cmp_utf16(&a.name, &b.name));
            if self.members.windows(2).any(|w| w[0].name == w[1].name) {
                // Duplicate names: `to_value` keeps the last; leave it to it.
                return Err(Unsupported);
            }
            // Copy the members after what was written, in order, then
            // drop what was written: no allocation once the buffer is warm.
            let written = self.start..self.out.len();
            for (i, m) in self.members.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                self.out.extend_from_within(m.start..m.end);
            }
            self.out.drain(written);
        }
        self.out.push(b'}');
        if self.variant {
            self.out.push(b'}');
        }
        Ok(())
    }
}

/// Elements of an array, written as they come.
struct Array<'a> {
    out: &'a mut Vec<u8>,
    first: bool,
    variant: Option<&'static str>,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        value.serialize(Writer { out: self.out })
    }

    fn finish(self) -> Result<(), Unsupported> {
        self.out.push(b']');
        if self.variant.is_some() {
            self.out.push(b'}');
        }
        Ok(())
    }
}

impl<'a> Writer<'a> {
    fn array(self, variant: Option<&'static str>) -> Array<'a> {
        if let Some(v) = variant {
            self.out.push(b'{');
            write_string_into(self.out, v);
            self.out.push(b':');
        }
        self.out.push(b'[');
        Array {
            out: self.out,
            first: true,
            variant,
        }
    }

    fn object(self, variant: Option<&'static str>, len: Option<usize>) -> Object<'a> {
        if let Some(v) = variant {
            self.out.push(b'{');
            write_string_into(self.out, v);
            self.out.push(b':');
        }
        self.out.push(b'{');
        Object {
            start: self.out.len(),
            out: self.out,
            members: SmallVec::with_capacity(len.unwrap_or(0)),
            sorted: true,
            pending_key: None,
            variant: variant.is_some(),
        }
    }
}

impl<'a> ser::Serializer for Writer<'a> {
    type Ok = ();
    type Error = Unsupported;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = Array<'a>;
    type SerializeMap = Object<'a>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = Object<'a>;

    fn serialize_bool(self, v: bool) -> Result<(), Unsupported> {
        self.out
            .extend_from_slice(if v { b"true" } else { b"false" });
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> Result<(), Unsupported> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Unsupported> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Unsupported> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Unsupported> {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Unsupported> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Unsupported> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Unsupported> {
        self.serialize_u64(u64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Unsupported> {
        self.out
            .extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Unsupported> {
        self.serialize_f64(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Unsupported> {
        // `to_value` turns NaN and infinities into null.
        if v.is_finite() {
            write_f64(self.out, v);
        } else {
            self.out.extend_from_slice(b"null");
        }
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Unsupported> {
        write_string_into(self.out, v.encode_utf8(&mut [0; 4]));
        Ok(())
    }
    fn serialize_str(self, v: &str) -> Result<(), Unsupported> {
        write_string_into(self.out, v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<(), Unsupported> {
        let mut array = self.array(None);
        for b in v {
            ser::SerializeSeq::serialize_element(&mut array, b)?;
        }
        array.finish()
    }
    fn serialize_none(self) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Unsupported> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Unsupported> {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Unsupported> {
        self.serialize_unit()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<(), Unsupported> {
        self.serialize_str(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        // serde_json's raw values and arbitrary-precision numbers hide here.
        if name.starts_with("$serde_json::private") {
            return Err(Unsupported);
        }
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Unsupported> {
        self.out.push(b'{');
        write_string_into(self.out, variant);
        self.out.push(b':');
        value.serialize(Writer { out: self.out })?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, Unsupported> {
        Ok(self.array(None))
    }
    fn serialize_tuple(self, _: usize) -> Result<Array<'a>, Unsupported> {
        Ok(self.array(None))
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Array<'a>, Unsupported> {
        Ok(self.array(None))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Array<'a>, Unsupported> {
        Ok(self.array(Some(variant)))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Object<'a>, Unsupported> {
        Ok(self.object(None, len))
    }
    fn serialize_struct(self, _: &'static str, len: usize) -> Result<Object<'a>, Unsupported> {
        Ok(self.object(None, Some(len)))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Object<'a>, Unsupported> {
        Ok(self.object(Some(variant), Some(len)))
    }
    fn serialize_i128(self, _: i128) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
    fn serialize_u128(self, _: u128) -> Result<(), Unsupported> {
        Err(Unsupported)
    }
}

/// The four array-shaped serializer traits, all one [`Array`].
macro_rules! array_traits {
    ($($name:ident :: $method:ident),*) => {$(
        impl ser::$name for Array<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
                self.element(value)
            }
            fn end(self) -> Result<(), Unsupported> {
                self.finish()
            }
        }
    )*};
}

array_traits!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field,
    SerializeTupleVariant::serialize_field
);

impl ser::SerializeMap for Object<'_> {
    type Ok = ();
    type Error = Unsupported;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Unsupported> {
        self.pending_key = Some(key.serialize(KeyWriter)?);
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Unsupported> {
        let key = self.pending_key.take().ok_or(Unsupported)?;
        self.member(Cow::Owned(key), value)
    }
    fn end(self) -> Result<(), Unsupported> {
        self.finish()
    }
}

/// The two struct-shaped serializer traits, both one [`Object`].
macro_rules! struct_traits {
    ($($name:ident),*) => {$(
        impl ser::$name for Object<'_> {
            type Ok = ();
            type Error = Unsupported;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), Unsupported> {
                self.member(Cow::Borrowed(key), value)
            }
            fn end(self) -> Result<(), Unsupported> {
                self.finish()
            }
        }
    )*};
}

struct_traits!(SerializeStruct, SerializeStructVariant);

/// Map keys: strings only; anything else takes the general path.
struct KeyWriter;

macro_rules! unsupported_keys {
    ($($method:ident($($arg:ty),*)),* $(,)?) => {
        $(fn $method(self $(, _: $arg)*) -> Result<String, Unsupported> { Err(Unsupported) })*
    };
}

impl ser::Serializer for KeyWriter {
    type Ok = String;
    type Error = Unsupported;
    type SerializeSeq = Impossible<String, Unsupported>;
    type SerializeTuple = Impossible<String, Unsupported>;
    type SerializeTupleStruct = Impossible<String, Unsupported>;
    type SerializeTupleVariant = Impossible<String, Unsupported>;
    type SerializeMap = Impossible<String, Unsupported>;
    type SerializeStruct = Impossible<String, Unsupported>;
    type SerializeStructVariant = Impossible<String, Unsupported>;

    fn serialize_str(self, v: &str) -> Result<String, Unsupported> {
        Ok(v.to_owned())
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
    ) -> Result<String, Unsupported> {
        Ok(variant.to_owned())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<String, Unsupported> {
        value.serialize(self)
    }
    unsupported_keys!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_bytes(&[u8]),
        serialize_none(),
        serialize_unit(),
        serialize_unit_struct(&'static str),
    );
    fn serialize_some<T: Serialize + ?Sized>(self, _: &T) -> Result<String, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<String, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self::SerializeSeq, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self::SerializeTuple, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStruct, Unsupported> {
        Err(Unsupported)
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Unsupported> {
        Err(Unsupported)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashMap};

    use proptest::prelude::*;
    use serde::Serialize;
    use serde_json::{Number, Value};

    use super::super::canonical_json;
    use super::write_canonical;

    /// The direct writer must say exactly what the `Value` path says, or
    /// step aside.
    fn same_as_value_path<T: Serialize>(x: &T) -> Result<(), TestCaseError> {
        let mut direct = Vec::new();
        if write_canonical(x, &mut direct).is_ok() {
            let via_value = serde_json::to_value(x).map(|v| canonical_json(&v));
            prop_assert_eq!(String::from_utf8(direct).ok(), via_value.ok());
        }
        Ok(())
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| Number::from_f64(f).map_or(Value::Null, Value::Number)),
            "[a-c\u{1}\n\"\\\\\u{e000}\u{1f600}]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-d\u{e000}\u{1f600}]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[derive(Serialize, Debug, Clone)]
    #[serde(rename_all = "snake_case")]
    enum Kind {
        Plain,
        Wrapped(u32),
        Pair(i8, String),
        Shaped { x: f32, y: Option<bool> },
    }

    #[derive(Serialize, Debug)]
    struct Sample {
        z_last: u64,
        a_first: i64,
        price: f64,
        name: String,
        letter: char,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: Option<String>,
        lines: Vec<(u8, String)>,
        by_name: BTreeMap<String, u32>,
        weights: HashMap<String, f32>,
        kind: Kind,
        #[serde(with = "serde_bytes_as_seq")]
        raw: Vec<u8>,
    }

    mod serde_bytes_as_seq {
        pub(super) fn serialize<S: serde::Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
            s.serialize_bytes(v)
        }
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop_oneof![
            Just(Kind::Plain),
            any::<u32>().prop_map(Kind::Wrapped),
            (any::<i8>(), "[a-z\"]{0,3}").prop_map(|(a, b)| Kind::Pair(a, b)),
            (any::<f32>(), any::<Option<bool>>()).prop_map(|(x, y)| Kind::Shaped { x, y }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn any_json_value_writes_as_through_value(v in any_json()) {
            same_as_value_path(&v)?;
            // A `Value` is always covered.
            let mut direct = Vec::new();
            prop_assert!(write_canonical(&v, &mut direct).is_ok());
        }

        #[test]
        fn typed_values_write_as_through_value(
            z_last in any::<u64>(), a_first in any::<i64>(), price in any::<f64>(),
            name in "\\PC{0,6}", letter in any::<char>(), note in proptest::option::of("[a-z]{0,3}"),
            lines in prop::collection::vec((any::<u8>(), "[a-z|]{0,3}"), 0..3),
            by_name in prop::collection::btree_map("[a-c\u{e000}\u{1f600}]{0,2}", any::<u32>(), 0..4),
            weights in prop::collection::hash_map("[a-c]{0,2}", any::<f32>(), 0..4),
            kind in any_kind(), raw in prop::collection::vec(any::<u8>(), 0..4),
        ) {
            let sample = Sample { z_last, a_first, price, name, letter, note, lines, by_name, weights, kind, raw };
            same_as_value_path(&sample)?;
        }
    }

    #[test]
    fn what_the_value_path_treats_specially_steps_aside() {
        let mut out = Vec::new();
        let int_keys: BTreeMap<u32, u32> = [(1, 2)].into();
        assert!(write_canonical(&int_keys, &mut out).is_err());
        assert!(write_canonical(&u128::MAX, &mut Vec::new()).is_err());
    }
}
