//! The argument sets that key derivation is measured with, shared by the
//! criterion bench (`checks/benches/idem.rs`) and the interleaved measurement
//! (`checks/benches/key_ratio.rs`).

use serde_json::{Value, json};

/// ≈ 100 bytes of JSON: a typical payment call.
pub(crate) fn small() -> Value {
    json!({"amount": 4200, "currency": "eur", "customer_id": "cus_42", "note": "order 1001, first charge"})
}

/// ≈ 2 KB: a flat object of 40 string fields.
pub(crate) fn medium() -> Value {
    let fields: serde_json::Map<String, Value> = (0..40)
        .map(|i| {
            (
                format!("field_{i:02}"),
                json!(format!("value number {i} of a medium-sized argument set")),
            )
        })
        .collect();
    Value::Object(fields)
}

/// ≈ 800 bytes, nested objects and arrays: an order with ten lines.
pub(crate) fn nested() -> Value {
    json!({
        "order": {"id": "o-1001", "customer": {"id": "cus_42", "address": {"city": "Oslo", "zip": "0150"}}},
        "lines": (0..10).map(|i| json!({"sku": format!("sku-{i}"), "qty": i, "price": {"amount": 199 + i, "currency": "eur"}})).collect::<Vec<_>>(),
        "flags": [true, false, null],
    })
}
