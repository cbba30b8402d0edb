//! A registry served over MCP: any MCP client (Claude Desktop, an IDE, the
//! MCP inspector, rmcp's or the Python SDK's client) lists the tools and
//! calls them, and a write tool called twice with the same arguments in one
//! run runs once: the second call gets the first call's result.
//!
//! ```text
//! cargo run -p idem-integrations --example mcp_server                         # stdio
//! cargo run -p idem-integrations --example mcp_server -- --http 127.0.0.1:8080 # streamable HTTP at /mcp
//! cargo run -p idem-integrations --example mcp_server -- --sqlite shop.db      # results survive restarts
//! cargo run -p idem-integrations --example mcp_server -- --http 127.0.0.1:8080 --token alice=secret-a --token bob=secret-b
//! ```
//!
//! With `--token`, HTTP requests must carry `Authorization: Bearer <token>`
//! (else 401), and each call is made for the token's user: the principal,
//! which scopes the user's runs (`idem::mcp`, "Runs and callers"). Without
//! it, each MCP session is a caller of its own.
//!
//! Tools: `lookup_order` (read), `charge_card` (write; each execution takes
//! the next charge id from a counter, so a replay is visible as the same
//! id), `charges_made` (read: how many times `charge_card` really ran) and
//! `subscribe` (a `global` write: once per address, in any run) and
//! `refund` (a write with `approval = "ask"`: a client that can ask its
//! person, by MCP elicitation, is asked to approve each refund before it
//! runs; `refunds_made` counts the refunds that really ran).
//! Logs go to stderr; over stdio, stdout carries the protocol.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;

use idem::SqliteStore;
use idem::mcp::StatelessWrites;
use idem::mcp::rmcp::{self, ServiceExt};
use idem::prelude::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The application state: a stand-in for a payment provider.
#[derive(Default)]
struct Shop {
    charges: AtomicU64,
    subscriptions: AtomicU64,
    refunds: AtomicU64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct ChargeArgs {
    /// The order to charge for.
    order_id: String,
    /// Amount in cents.
    amount: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Receipt {
    charge_id: String,
    order_id: String,
    amount: u64,
    /// The idempotency key the provider was given.
    idempotency_key: String,
}

/// Charge the customer's card for an order.
#[write_tool(destructive = false, open_world = true)]
async fn charge_card(#[args] a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Receipt, String> {
    let n = ctx.state().charges.fetch_add(1, Ordering::SeqCst) + 1;
    eprintln!("charge_card ran: order {} for {}", a.order_id, a.amount);
    Ok(Receipt {
        charge_id: format!("ch_{n:04}"),
        order_id: a.order_id,
        amount: a.amount,
        idempotency_key: ctx.idem_key().to_string(),
    })
}

/// Subscribe an address to the newsletter (once, whoever asks).
#[write_tool(scope = "global")]
async fn subscribe(
    /// The address.
    email: String,
    ctx: &WriteCtx<Shop>,
) -> Result<String, String> {
    let n = ctx.state().subscriptions.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("subscription {n} for {email}"))
}

/// Refund an order, once a person has approved it.
#[write_tool(approval = "ask")]
async fn refund(
    /// The order to refund.
    order_id: String,
    /// Amount in cents.
    amount: u64,
    ctx: &WriteCtx<Shop>,
) -> Result<String, String> {
    let n = ctx.state().refunds.fetch_add(1, Ordering::SeqCst) + 1;
    eprintln!("refund ran: order {order_id} for {amount}");
    Ok(format!("rf_{n:04}: {amount} refunded on {order_id}"))
}

/// How many refunds were really made.
#[read_tool]
async fn refunds_made(ctx: &Ctx<Shop>) -> Result<u64, String> {
    Ok(ctx.state().refunds.load(Ordering::SeqCst))
}

/// Look an order up.
#[read_tool]
async fn lookup_order(
    /// The order's id.
    order_id: String,
) -> Result<serde_json::Value, String> {
    Ok(serde_json::json!({ "order_id": order_id, "status": "awaiting payment" }))
}

/// How many charges the payment provider has made.
#[read_tool]
async fn charges_made(ctx: &Ctx<Shop>) -> Result<u64, String> {
    Ok(ctx.state().charges.load(Ordering::SeqCst))
}

/// The shop's tools over MCP.
#[derive(clap::Parser)]
struct Cli {
    /// Keep the records in this SQLite file (default: in memory).
    #[arg(long)]
    sqlite: Option<std::path::PathBuf>,
    /// Serve streamable HTTP on this address instead of stdio.
    #[arg(long)]
    http: Option<String>,
    /// Over HTTP, accept `Authorization: Bearer TOKEN` as USER (repeatable);
    /// other requests are refused.
    #[arg(long, value_name = "USER=TOKEN", value_parser = user_token)]
    token: Vec<(String, String)>,
    /// Over HTTP, refuse writes that come without a session or a run id,
    /// instead of scoping them to their caller.
    #[arg(long)]
    refuse_stateless_writes: bool,
}

fn user_token(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((user, token)) if !user.is_empty() && !token.is_empty() => {
            Ok((user.to_owned(), token.to_owned()))
        }
        _ => Err("expected USER=TOKEN".to_owned()),
    }
}

/// The user an authenticated request comes from, as `authenticate` puts it
/// in the request's extensions for the MCP server's principal hook.
#[derive(Clone)]
struct User(String);

/// Bearer tokens by token, to their user.
type Tokens = Arc<HashMap<String, String>>;

/// The authentication middleware: a known bearer token, or 401.
async fn authenticate(
    State(tokens): State<Tokens>,
    mut request: Request,
    next: Next,
) -> Result<Response, StatusCode> {
    let user = request
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .and_then(|token| tokens.get(token))
        .ok_or(StatusCode::UNAUTHORIZED)?;
    let user = User(user.clone());
    request.extensions_mut().insert(user);
    Ok(next.run(request).await)
}

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let cli: Cli = clap::Parser::parse();
    let mut builder = Registry::builder(Shop::default());
    if let Some(path) = &cli.sqlite {
        builder = builder.store(SqliteStore::open(&path).await?);
    }
    let server = builder
        .tool(charge_card)
        .tool(lookup_order)
        .tool(charges_made)
        .tool(subscribe)
        .tool(refund)
        .tool(refunds_made)
        .build()?
        .into_mcp_server()
        .with_server_info("idem-shop", env!("CARGO_PKG_VERSION"));

    match cli.http {
        None => {
            eprintln!("mcp_server: serving on stdio, run {}", server.run_id());
            server
                .serve(rmcp::transport::stdio())
                .await?
                .waiting()
                .await?;
        }
        Some(addr) => {
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            let policy = match cli.refuse_stateless_writes {
                true => StatelessWrites::Refuse,
                false => StatelessWrites::CallerScope,
            };
            let server = server.stateless_writes(policy).with_principal(|request| {
                request.extensions.get::<User>().map(|user| user.0.clone())
            });
            let service = server.streamable_http(Default::default());
            let mut app = axum::Router::new().nest_service("/mcp", service);
            if !cli.token.is_empty() {
                let tokens: Tokens = Arc::new(
                    cli.token
                        .into_iter()
                        .map(|(user, token)| (token, user))
                        .collect(),
                );
                app = app.layer(axum::middleware::from_fn_with_state(tokens, authenticate));
            }
            // The address actually bound, for `--http 127.0.0.1:0`.
            eprintln!(
                "mcp_server: listening on http://{}/mcp",
                listener.local_addr()?
            );
            axum::serve(listener, app).await?;
        }
    }
    Ok(())
}
