//! `integrations/examples/prometheus.rs`, run as a user would: the demo's
//! three scenes with a Prometheus exporter, whose scrape counts every
//! decision (each charge ran once, each duplicate was replayed).

#[path = "support/example.rs"]
mod examples;

#[test]
fn the_scrape_after_the_demo_counts_one_run_and_the_replays() {
    let output = std::process::Command::new(examples::example("prometheus"))
        .output()
        .expect("run the prometheus example");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let (demo, scrape) = stdout
        .split_once("── What an operator sees (a Prometheus scrape)")
        .expect("the scrape");
    assert!(demo.contains("one charge per order"), "{demo}");
    // Scenes 1 and 2, in this process: each charge ran once and was
    // replayed once.
    let calls = |outcome: &str| {
        format!("idem_calls{{gen_ai_tool_name=\"charge_card\",idem_outcome=\"{outcome}\"}} 2")
    };
    assert!(scrape.contains(&calls("ran")), "{scrape}");
    assert!(scrape.contains(&calls("replayed")), "{scrape}");
    assert!(
        scrape.contains("gen_ai_execute_tool_duration_count{"),
        "{scrape}"
    );
    assert!(
        scrape.contains(
            "idem_store_duration_count{db_system_name=\"sqlite\",db_operation_name=\"claim\""
        ),
        "{scrape}"
    );
    // Scene 3's resumed agent process: its charge was replayed.
    let resumed = "idem_calls{gen_ai_tool_name=\"charge_card\",idem_outcome=\"replayed\"} 1";
    assert!(demo.contains(resumed), "{demo}");
}
