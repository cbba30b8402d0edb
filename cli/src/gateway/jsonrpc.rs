//! JSON-RPC messages as the gateway relays them: JSON objects, read for
//! the few members it routes by (`id`, `method`, `_meta`) and otherwise
//! passed on as they came, so that whatever a newer protocol adds to a
//! message reaches the other side untouched.

use serde_json::{Map, Value, json};

/// A message's `_meta` member naming the request that a subscription's
/// notifications belong to (MCP 2026-07-28, `subscriptions/listen`).
pub(crate) const SUBSCRIPTION_META: &str = "io.modelcontextprotocol/subscriptionId";

/// The JSON-RPC error codes the gateway answers with itself.
pub(crate) mod code {
    /// The message is not JSON.
    pub(crate) const PARSE_ERROR: i64 = -32700;
    /// The message is not a JSON-RPC request, notification or response.
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    /// The request's parameters are not what its method takes.
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    /// The gateway could not get the request answered.
    pub(crate) const INTERNAL_ERROR: i64 = -32603;
}

/// What a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// It has a `method` and an `id`: it wants a response.
    Request,
    /// It has a `method` and no `id`.
    Notification,
    /// It has an `id` and a `result` or an `error`.
    Response,
}

/// What `message` is, or `None` if it is none of the three.
pub(crate) fn kind(message: &Value) -> Option<Kind> {
    let object = message.as_object()?;
    let has = |member| object.contains_key(member);
    match (object.get("method"), object.get("id")) {
        (Some(Value::String(_)), Some(_)) => Some(Kind::Request),
        (Some(Value::String(_)), None) => Some(Kind::Notification),
        (None, Some(_)) if has("result") || has("error") => Some(Kind::Response),
        _ => None,
    }
}

/// A request's or a notification's method.
pub(crate) fn method(message: &Value) -> Option<&str> {
    message.get("method").and_then(Value::as_str)
}

/// A request's or a response's id.
pub(crate) fn id(message: &Value) -> Option<&Value> {
    message.get("id")
}

/// A message's `params`, if it has them as an object.
pub(crate) fn params(message: &Value) -> Option<&Map<String, Value>> {
    message.get("params").and_then(Value::as_object)
}

/// A message's `params`, made an object if it had none.
pub(crate) fn params_mut(message: &mut Value) -> Option<&mut Map<String, Value>> {
    let object = message.as_object_mut()?;
    let params = object
        .entry("params")
        .or_insert_with(|| Value::Object(Map::new()));
    params.as_object_mut()
}

/// The `_meta` of a message's `params`, if any.
pub(crate) fn meta(message: &Value) -> Option<&Map<String, Value>> {
    params(message)?.get("_meta").and_then(Value::as_object)
}

/// The `_meta` of a message's `params`, made an object if it had none.
pub(crate) fn meta_mut(message: &mut Value) -> Option<&mut Map<String, Value>> {
    let meta = params_mut(message)?
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    meta.as_object_mut()
}

/// Where a request names its protocol, on MCP 2026-07-28 and later.
pub(crate) const PROTOCOL_META: &str = "io.modelcontextprotocol/protocolVersion";
/// Where such a request says what its client can do.
pub(crate) const CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";
/// Where such a request names its client.
pub(crate) const CLIENT_INFO_META: &str = "io.modelcontextprotocol/clientInfo";

/// Whether `request` names MCP 2026-07-28 or later.
pub(crate) fn since_2026(request: &Value) -> bool {
    meta(request)
        .and_then(|m| m.get(PROTOCOL_META))
        .and_then(Value::as_str)
        .is_some_and(|version| version >= "2026-07-28")
}

/// `response` with its result saying it is complete (`"resultType":
/// "complete"`) unless it says what it is, where its request is on MCP
/// 2026-07-28 or later (`modern`: [`since_2026`]), whose clients read no
/// result without it: for the results the gateway makes itself.
pub(crate) fn completed(mut response: Value, modern: bool) -> Value {
    if modern && let Some(result) = response.get_mut("result").and_then(Value::as_object_mut) {
        result
            .entry("resultType")
            .or_insert_with(|| "complete".into());
    }
    response
}

/// A request the gateway sends itself.
pub(crate) fn request(id: Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A notification the gateway sends itself.
pub(crate) fn notification(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
}

/// The response to request `id` with `result`.
pub(crate) fn response(id: Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The error response to request `id` (`null` when it could not be read).
pub(crate) fn error(id: Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// The `_meta` a write is bound by: the request's, with the key the client
/// sent as `params.idempotencyKey` (the request-level shape of MCP's
/// proposed request idempotency, SEP-3182) as its operation key, unless
/// `_meta` names one.
pub(crate) fn operation_meta(request: &Value) -> Option<Map<String, Value>> {
    let mut meta = meta(request).cloned();
    let given = params(request)
        .and_then(|p| p.get("idempotencyKey"))
        .and_then(Value::as_str);
    if let Some(key) = given {
        let meta = meta.get_or_insert_with(Map::new);
        if !meta.contains_key(idem::mcp::OPERATION_KEY_META) {
            meta.insert(idem::mcp::OPERATION_KEY_META.into(), key.into());
        }
    }
    meta
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_told_by_its_members() {
        let request = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
        let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let result = json!({"jsonrpc": "2.0", "id": "a", "result": {}});
        let error = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -1, "message": ""}});
        assert_eq!(kind(&request), Some(Kind::Request));
        assert_eq!(kind(&notification), Some(Kind::Notification));
        assert_eq!(kind(&result), Some(Kind::Response));
        assert_eq!(kind(&error), Some(Kind::Response));
        for refused in [json!([]), json!({"id": 1}), json!({"method": 3, "id": 1})] {
            assert_eq!(kind(&refused), None, "{refused}");
        }
    }

    #[test]
    fn a_result_made_for_a_2026_request_says_it_is_complete() {
        let modern =
            json!({"method": "tools/call", "params": {"_meta": {PROTOCOL_META: "2026-07-28"}}});
        let older = json!({"method": "tools/call", "params": {}});
        let made = response(json!(1), json!({"content": []}));
        let (modern, older) = (since_2026(&modern), since_2026(&older));
        assert!(modern && !older);
        assert_eq!(
            completed(made.clone(), modern)["result"]["resultType"],
            "complete"
        );
        assert_eq!(completed(made, older)["result"].get("resultType"), None);
        let asks = response(json!(1), json!({"resultType": "input_required"}));
        assert_eq!(
            completed(asks, modern)["result"]["resultType"],
            "input_required"
        );
    }

    #[test]
    fn meta_is_made_where_a_message_has_none() {
        let mut message = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"});
        meta_mut(&mut message)
            .expect("an object")
            .insert("k".into(), 1.into());
        assert_eq!(meta(&message), json!({"k": 1}).as_object());
    }
}
