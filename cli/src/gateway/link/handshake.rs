//! What sets up a client's session with the upstream, kept by the link to
//! set up a new connection's the same way: the client's `initialize` (or
//! one the link makes itself, for clients that opened no session at an
//! upstream that serves sessions only), whether it said it was
//! initialized, and what its latest request said of it in `_meta` (MCP
//! 2026-07-28 puts the client's version, capabilities and info on every
//! request), for the requests the gateway makes itself.

use serde_json::{Map, Value, json};

use crate::gateway::jsonrpc::{self, CAPABILITIES_META, CLIENT_INFO_META, SUBSCRIPTION_META};

/// The newest protocol with sessions: the one a session the link opens
/// itself is asked for.
const SESSION_PROTOCOL: &str = "2025-11-25";

/// See the module docs.
#[derive(Default)]
pub(super) struct Handshake {
    /// The `params` of the client's `initialize`.
    pub(super) initialize: Option<Value>,
    /// The client sent `notifications/initialized`.
    pub(super) initialized: bool,
    /// The protocol's own members of the client's latest request `_meta`.
    pub(super) protocol_meta: Map<String, Value>,
}

impl Handshake {
    /// Notes what a client's request of `method` says of its session.
    pub(super) fn note(&mut self, method: &str, request: &Value) {
        if method == "initialize" {
            self.initialize = request.get("params").cloned();
            self.initialized = false;
        }
        self.note_client(request);
    }

    /// Notes what a client's request says of its client in `_meta`.
    pub(super) fn note_client(&mut self, request: &Value) {
        let Some(meta) = jsonrpc::meta(request) else {
            return;
        };
        let protocol: Map<String, Value> = meta
            .iter()
            .filter(|(k, _)| k.starts_with("io.modelcontextprotocol/") && *k != SUBSCRIPTION_META)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !protocol.is_empty() {
            self.protocol_meta = protocol;
        }
    }

    /// For a client that opened no session: an `initialize` of the link's
    /// own, made of what the client's requests say of it (the gateway's
    /// name where they say nothing), and taken as initialized.
    pub(super) fn initialize_for_the_client(&mut self) {
        if self.initialize.is_some() {
            return;
        }
        let said = |key: &str| self.protocol_meta.get(key).cloned();
        self.initialize = Some(json!({
            "protocolVersion": SESSION_PROTOCOL,
            "capabilities": said(CAPABILITIES_META).unwrap_or_else(|| json!({})),
            "clientInfo": said(CLIENT_INFO_META).unwrap_or_else(|| json!({
                "name": "idem-gateway", "version": env!("CARGO_PKG_VERSION")})),
        }));
        self.initialized = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_for_a_stateless_client_says_what_its_requests_say() {
        let mut handshake = Handshake::default();
        let request = json!({"method": "tools/call", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            CAPABILITIES_META: {"elicitation": {}},
            CLIENT_INFO_META: {"name": "agent", "version": "2"},
            SUBSCRIPTION_META: 7,
        }}});
        handshake.note("tools/call", &request);
        assert!(!handshake.protocol_meta.contains_key(SUBSCRIPTION_META));
        handshake.initialize_for_the_client();
        let made = handshake.initialize.clone().expect("an initialize");
        assert_eq!(made["protocolVersion"], SESSION_PROTOCOL);
        assert_eq!(made["capabilities"], json!({"elicitation": {}}));
        assert_eq!(made["clientInfo"]["name"], "agent");
        assert!(handshake.initialized);
        // A client's own initialize is never replaced.
        let own = json!({"method": "initialize", "params": {"protocolVersion": "2025-06-18"}});
        handshake.note("initialize", &own);
        handshake.initialize_for_the_client();
        let kept = handshake.initialize.expect("the client's");
        assert_eq!(kept["protocolVersion"], "2025-06-18");
    }
}
