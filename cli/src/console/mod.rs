//! `idem console`: a web page and a JSON API on one address, where the
//! people who decide (support leads, operators) see what waits for them
//! and decide: operations awaiting approval (approve, deny with a
//! reason, revoke an approval not used yet), unknown outcomes (resolve as
//! done, failed or to run again), and the decisions made.
//!
//! Every decision goes through the same code as `idem approve`, `deny`,
//! `revoke` and `resolve` (the store's fenced settle on the token that
//! asked: of two at once one lands, the other is told 409), is announced
//! to the calls waiting on it, sent to the webhooks of `--config`'s
//! `[notify]`, and recorded with the signed-in user as who decided
//! (`users.rs`, `auth.rs`: bearer tokens, or a session cookie from the
//! sign-in form). The API is `api.rs`; what it serves from, `state.rs`;
//! what it shows of a record, `views.rs`; the page, `page.html`,
//! embedded.

mod api;
mod auth;
mod fresh;
mod read;
mod reply;
mod state;
mod users;
mod views;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use clap::Args;
use idem::notify::Webhooks;
use idem::store::ScanFilter;

use self::state::Console;
use self::users::Users;
use crate::guard::{Guard, GuardArgs};
use crate::store::StoreUrl;

/// `idem console`'s options.
#[derive(Args)]
pub(crate) struct ConsoleArgs {
    #[command(flatten)]
    store: StoreUrl,
    /// The registry's namespace, if it has one.
    #[arg(long, default_value = "")]
    namespace: String,
    /// Where to serve the page and the API.
    #[arg(long, default_value = "127.0.0.1:8790", value_name = "ADDR")]
    listen: String,
    /// A user and the token they sign in with (repeatable); the user is
    /// who a decision they make is recorded as. Without any, on loopback
    /// only, everyone is the user running the console ($USER). `ps`
    /// shows it to every user of the host: on a shared host, give tokens
    /// with --token-file or IDEM_TOKENS (`USER=TOKEN` entries separated by
    /// commas or spaces) instead.
    #[arg(long = "token", value_name = "USER=TOKEN", value_parser = crate::tokens::user_token)]
    tokens: Vec<(String, String)>,
    /// The tokens of a file as well: a `USER=TOKEN` line each (blank lines
    /// and `#` comments skipped).
    #[arg(long, value_name = "FILE", env = "IDEM_TOKEN_FILE")]
    token_file: Option<std::path::PathBuf>,
    /// Show and decide only the operations of this tenant (repeatable):
    /// any other is as if it were not there.
    #[arg(long = "tenant", value_name = "TENANT")]
    tenants: Vec<String>,
    /// A TOML file with a `[notify]` table (the gateway's own file
    /// serves): every decision is sent to its webhooks.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<std::path::PathBuf>,
    #[command(flatten)]
    guard: GuardArgs,
}

/// Serves the console until the process is stopped.
pub(crate) async fn serve(args: ConsoleArgs, webhooks: Option<Webhooks>) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", args.listen))?;
    let bound: SocketAddr = listener.local_addr().map_err(|e| e.to_string())?;
    let tokens = crate::tokens::gather(args.tokens, args.token_file.as_deref())?;
    crate::tokens::may_serve(bound, &tokens, "approve operations", None)?;
    let users = Users::new(tokens)?;
    let console = Arc::new(Console::new(
        args.store.open().await?,
        ScanFilter::namespace(args.namespace),
        args.tenants,
        webhooks,
        users,
    ));
    let guard = Arc::new(Guard::new(&args.guard, bound)?.with_form("/sign-in"));
    let app = axum::Router::new()
        .route("/", get(auth::page))
        // Where the webhooks' `console_url` links lead: the page, that
        // operation first.
        .route("/operations/{key}", get(auth::page))
        .route("/sign-in", post(auth::sign_in))
        .route("/sign-out", post(auth::sign_out))
        .nest("/api", api::routes(console.clone()))
        .with_state(console)
        .layer(axum::middleware::from_fn_with_state(
            guard,
            crate::guard::layer,
        ));
    eprintln!("idem console: serving on http://{bound}/");
    axum::serve(listener, app)
        .await
        .map_err(|e| format!("the HTTP server stopped: {e}"))
}
