//! A registry served over MCP: any MCP client (Claude Desktop, an IDE, the
//! MCP inspector, rmcp's or the Python SDK's client) lists the tools and
//! calls them, and a write tool called twice with the same arguments in one
//! run runs once: the second call gets the first call's result.
//!
//! ```text
//! cargo run --example mcp_server                         # stdio
//! cargo run --example mcp_server -- --http 127.0.0.1:8080 # streamable HTTP at /mcp
//! cargo run --example mcp_server -- --sqlite shop.db      # results survive restarts
//! ```
//!
//! Tools: `lookup_order` (read), `charge_card` (write; each execution takes
//! the next charge id from a counter, so a replay is visible as the same
//! id) and `charges_made` (read: how many times `charge_card` really ran).
//! Logs go to stderr; over stdio, stdout carries the protocol.

use std::sync::atomic::{AtomicU64, Ordering};

use idem::SqliteStore;
use idem::mcp::rmcp::{self, ServiceExt};
use idem::prelude::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The application state: a stand-in for a payment provider.
#[derive(Default)]
struct Shop {
    charges: AtomicU64,
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
            let service = server.streamable_http(Default::default());
            let app = axum::Router::new().nest_service("/mcp", service);
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
