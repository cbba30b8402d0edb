//! `list` and `stats`: every record of a namespace, a page at a time
//! (`IdemStore::scan`: Redis `SCAN .. MATCH`, node by node on a cluster;
//! SQL in key order along the primary key), printed as it comes, with a
//! count on stderr while a long scan runs at a terminal.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use idem::IdemStore;
use idem::store::{RecordInfo, RecordState, ScanFilter};
use serde_json::json;

use crate::output::say;
use crate::record::{self, HEADER};

/// How many records a page looks at.
const PAGE: usize = 500;

/// Calls `each` with every record `filter` admits, up to `limit`; shows
/// progress on a terminal.
pub(crate) async fn scan(
    store: &dyn IdemStore,
    filter: &ScanFilter,
    limit: Option<usize>,
    mut each: impl FnMut(RecordInfo),
) -> Result<usize, String> {
    let progress = std::io::stderr().is_terminal();
    let (mut seen, mut cursor) = (0usize, String::new());
    loop {
        let page = store
            .scan(filter, &cursor, PAGE)
            .await
            .map_err(|e| format!("cannot scan: {e}"))?;
        for record in page.records {
            if limit.is_some_and(|limit| seen >= limit) {
                break;
            }
            seen += 1;
            each(record);
        }
        if progress {
            eprint!("\r{seen} records…");
        }
        match page.next {
            Some(next) if limit.is_none_or(|limit| seen < limit) => cursor = next,
            _ => break,
        }
    }
    if progress {
        eprint!("\r\x1b[K");
    }
    Ok(seen)
}

/// The records `filter` admits that `keep` keeps, oldest first (in their
/// state: what waits longest, first); a record of format 1 says no age,
/// and goes last.
pub(crate) async fn oldest_first(
    store: &dyn IdemStore,
    filter: &ScanFilter,
    keep: impl Fn(&RecordInfo) -> bool,
) -> Result<Vec<RecordInfo>, String> {
    let mut records = Vec::new();
    scan(store, filter, None, |record| {
        if keep(&record) {
            records.push(record);
        }
    })
    .await?;
    by_age(&mut records);
    Ok(records)
}

/// `records` oldest first (in their state: what waits longest, first); a
/// record of format 1 says no age, and goes last.
pub(crate) fn by_age(records: &mut [RecordInfo]) {
    records.sort_by_key(|r| std::cmp::Reverse(r.age.unwrap_or(Duration::ZERO)));
}

/// `list`: the records as a table, or one JSON object a line.
pub(crate) async fn list(
    store: &dyn IdemStore,
    filter: &ScanFilter,
    limit: Option<usize>,
    json: bool,
) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    if !json {
        let _ = writeln!(out, "{HEADER}");
    }
    let mut broken = false;
    let shown = scan(store, filter, limit, |record| {
        let line = if json {
            record::to_json(&record).to_string()
        } else {
            record::row(&record)
        };
        // A closed pipe (`| head`) ends the listing quietly.
        broken |= writeln!(out, "{line}").is_err();
    })
    .await?;
    if !json && !broken {
        eprintln!("{shown} record{}", if shown == 1 { "" } else { "s" });
    }
    Ok(())
}

/// `stats`: counts by state and by tool, and the oldest running claim.
pub(crate) async fn stats(
    store: &dyn IdemStore,
    filter: &ScanFilter,
    json: bool,
) -> Result<(), String> {
    let mut by_state: BTreeMap<RecordState, u64> = BTreeMap::new();
    let mut by_tool: BTreeMap<String, BTreeMap<RecordState, u64>> = BTreeMap::new();
    let mut oldest: Option<(Duration, String)> = None;
    let total = scan(store, filter, None, |record| {
        *by_state.entry(record.state).or_default() += 1;
        let tool = record.tool.clone().unwrap_or_else(|| "-".into());
        *by_tool
            .entry(tool)
            .or_default()
            .entry(record.state)
            .or_default() += 1;
        if record.state == RecordState::Running
            && let Some(age) = record.age
            && oldest.as_ref().is_none_or(|(a, _)| age > *a)
        {
            oldest = Some((age, record.key.into_string()));
        }
    })
    .await?;
    let count = |counts: &BTreeMap<RecordState, u64>, s: RecordState| *counts.get(&s).unwrap_or(&0);
    if json {
        let states = |counts: &BTreeMap<RecordState, u64>| {
            RecordState::ALL
                .into_iter()
                .map(|s| (s.as_str().to_owned(), json!(count(counts, s))))
                .collect::<serde_json::Map<_, _>>()
        };
        let tools: serde_json::Map<_, _> = by_tool
            .iter()
            .map(|(tool, counts)| (tool.clone(), states(counts).into()))
            .collect();
        let out = json!({
            "records": total,
            "states": states(&by_state),
            "tools": tools,
            "oldest_running": oldest.as_ref().map(|(age, key)| json!({
                "key": key, "age_ms": u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
            })),
        });
        say!("{out}");
        return Ok(());
    }
    let mut header = format!("{:<20}", "TOOL");
    for state in RecordState::ALL {
        header.push_str(&format!(" {:>9}", state.as_str()));
    }
    say!("{header}");
    let print = |name: &str, counts: &BTreeMap<RecordState, u64>| {
        let mut line = format!("{name:<20}");
        for state in RecordState::ALL {
            line.push_str(&format!(" {:>9}", count(counts, state)));
        }
        say!("{line}");
    };
    for (tool, counts) in &by_tool {
        print(tool, counts);
    }
    print("all", &by_state);
    match oldest {
        Some((age, key)) => say!("oldest running claim: {} ({key})", record::human(age)),
        None => say!("oldest running claim: none"),
    }
    Ok(())
}
