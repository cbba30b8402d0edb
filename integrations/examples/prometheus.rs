//! The demo's three scenes (`cargo run --example agent`) with a Prometheus
//! exporter installed, printing the scrape at the end: every call's
//! outcome, its duration, and the store's operations, as an operator's
//! dashboard would get them.
//!
//! ```text
//! cargo run -p idem-integrations --example prometheus
//! ```
//!
//! Scene 3 runs in agent processes of their own: the resumed one prints its
//! own scrape before it exits (the first is killed mid-turn).

#[path = "../../examples/agent/scenes.rs"]
mod scenes;

use metrics_exporter_prometheus::PrometheusBuilder;

#[tokio::main]
async fn main() -> Result<(), scenes::BoxError> {
    let handle = PrometheusBuilder::new().install_recorder()?;
    let options = <scenes::Options as clap::Parser>::parse();
    let phase = options.phase.clone();
    scenes::main(options).await?;
    let scrape = handle.render();
    match phase.as_deref() {
        None => println!("\n── What an operator sees (a Prometheus scrape)\n\n{scrape}"),
        Some(phase) => {
            println!("   (agent process, phase {phase}: its own scrape)");
            for line in scrape.lines().filter(|l| l.starts_with("idem_calls")) {
                println!("     {line}");
            }
        }
    }
    Ok(())
}
