//! The demo's agent, payment provider and scenes (`main.rs` runs them;
//! `integrations/examples/prometheus.rs` runs them with metrics).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use idem::prelude::*;
use idem::{IdemStore, PostgresOptions, PostgresStore, RedisStore, SqliteStore};
use serde_json::{Value, json};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

// ---------------------------------------------------------------------------
// The payment provider: a file, so that it outlives the agent process. Like
// Stripe, it honours an `Idempotency-Key` when it is given one; with
// `--no-idempotency-keys` it takes none, as many gateways do, but it can
// still be asked for a customer's charges.

struct Provider {
    dir: PathBuf,
    keys: bool,
}

#[derive(Serialize, Deserialize)]
struct Charge {
    id: String,
    amount: u64,
    idempotency_key: Option<String>,
    #[serde(default)]
    customer: Option<String>,
}

impl Provider {
    fn charges(&self) -> Vec<Charge> {
        std::fs::read_to_string(self.dir.join("charges.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn charge(
        &self,
        amount: u64,
        customer: Option<&str>,
        idempotency_key: Option<&str>,
    ) -> std::io::Result<String> {
        let idempotency_key = idempotency_key.filter(|_| self.keys);
        let charges = self.charges();
        if let Some(key) = idempotency_key
            && let Some(seen) = charges
                .iter()
                .find(|c| c.idempotency_key.as_deref() == Some(key))
        {
            return Ok(seen.id.clone());
        }
        let charge = Charge {
            id: format!("ch_{:04}", charges.len() + 1),
            amount,
            idempotency_key: idempotency_key.map(str::to_owned),
            customer: customer.map(str::to_owned),
        };
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("charges.jsonl"))?;
        writeln!(file, "{}", serde_json::to_string(&charge)?)?;
        file.sync_all()?;
        Ok(charge.id)
    }
}

// ---------------------------------------------------------------------------
// The tool.

pub(crate) struct Shop {
    provider: Provider,
    body_runs: AtomicUsize,
    /// The agent process dies right after the charge, before idem records
    /// it (`--phase crash-in-body`).
    crash_after_charge: bool,
}

impl Shop {
    /// A shop whose payment provider keeps its charges in `dir`.
    #[allow(
        dead_code,
        reason = "the retry check in tests/demo.rs makes its shops with it"
    )]
    pub(crate) fn at(dir: &Path) -> Shop {
        Shop::with_provider(dir, true)
    }

    /// A shop whose payment provider keeps its charges in `dir`, taking
    /// idempotency keys or not.
    fn with_provider(dir: &Path, keys: bool) -> Shop {
        Shop {
            provider: Provider {
                dir: dir.to_owned(),
                keys,
            },
            body_runs: AtomicUsize::new(0),
            crash_after_charge: false,
        }
    }

    /// The charges the provider made.
    #[allow(dead_code, reason = "the retry check in tests/demo.rs counts with it")]
    pub(crate) fn charges(&self) -> usize {
        self.provider.charges().len()
    }
}

#[derive(Serialize, Deserialize, JsonSchema)]
pub(crate) struct ChargeArgs {
    /// Amount in minor units (cents).
    amount: u64,
    /// ISO currency code.
    currency: String,
    customer_id: String,
}

/// Charge a customer's card.
#[write_tool(lease = "2s", on_in_flight = "wait(10s)")]
pub(crate) async fn charge_card(
    #[args] a: ChargeArgs,
    ctx: &WriteCtx<Shop>,
) -> Result<Value, String> {
    charge(a, ctx)
}

/// Charge a customer's card; after a crash, ask the provider first.
#[write_tool(name = "charge_card", lease = "2s", on_in_flight = "wait(10s)", verify = charged_already)]
async fn charge_card_verified(
    #[args] a: ChargeArgs,
    ctx: &WriteCtx<Shop>,
) -> Result<Value, String> {
    charge(a, ctx)
}

/// Charge a customer's card at most once: after a crash, a person checks.
#[write_tool(
    name = "charge_card",
    lease = "2s",
    on_in_flight = "wait(10s)",
    on_uncertain = "refuse"
)]
async fn charge_card_at_most_once(
    #[args] a: ChargeArgs,
    ctx: &WriteCtx<Shop>,
) -> Result<Value, String> {
    charge(a, ctx)
}

/// Charge a customer's card once a person approves that very charge; the
/// call waits for the decision, up to ten minutes.
#[write_tool(
    name = "charge_card",
    lease = "2s",
    on_in_flight = "wait(10s)",
    approval = "required",
    approval_wait = "10m"
)]
async fn charge_card_approved(
    #[args] a: ChargeArgs,
    ctx: &WriteCtx<Shop>,
) -> Result<Value, String> {
    charge(a, ctx)
}

/// The charge every version of the tool makes.
fn charge(a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Value, String> {
    let shop = ctx.state();
    shop.body_runs.fetch_add(1, Ordering::SeqCst);
    let charge = shop
        .provider
        .charge(
            a.amount,
            Some(&a.customer_id),
            Some(ctx.idem_key().as_str()),
        )
        .map_err(|e| format!("payment provider: {e}"))?;
    if shop.crash_after_charge {
        crash_here();
    }
    Ok(
        json!({ "charge": charge, "amount": a.amount, "currency": a.currency, "customer": a.customer_id }),
    )
}

/// Asks the provider whether the customer was charged that amount.
async fn charged_already(a: ChargeArgs, ctx: &WriteCtx<Shop>) -> Result<Verified<Value>, String> {
    let charges = ctx.state().provider.charges();
    let found = charges
        .iter()
        .find(|c| c.amount == a.amount && c.customer.as_deref() == Some(a.customer_id.as_str()));
    Ok(match found {
        Some(c) => Verified::Done(json!({
            "charge": c.id, "amount": a.amount, "currency": a.currency,
            "customer": a.customer_id, "verified_with_provider": true,
        })),
        None => Verified::NotDone,
    })
}

/// What the agent calls tools through: idem's registry, or (`--naive`)
/// the same charge made directly, with no key to deduplicate on.
enum Tools {
    Idem(Registry<Shop>),
    Naive(Arc<Shop>),
}

impl Tools {
    fn shop(&self) -> &Shop {
        match self {
            Tools::Idem(r) => r.state(),
            Tools::Naive(shop) => shop,
        }
    }

    async fn call(&self, run_id: &str, name: &str, args: &str) -> Result<Value, String> {
        let args: Value = serde_json::from_str(args).map_err(|e| e.to_string())?;
        match self {
            Tools::Idem(registry) => registry
                .call(run_id, name, args)
                .await
                .map_err(|e| e.model_message()),
            Tools::Naive(shop) => {
                shop.body_runs.fetch_add(1, Ordering::SeqCst);
                let amount = args["amount"].as_f64().unwrap_or(0.0) as u64;
                let charge = shop
                    .provider
                    .charge(amount, None, None)
                    .map_err(|e| e.to_string())?;
                Ok(json!({ "charge": charge, "amount": amount }))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The scripted model: no network, no key. It asks for one charge, then
// (in scene 2) asks again with a new tool_call_id, then says it is done.

#[derive(Clone, Debug, Serialize, Deserialize)]
enum Message {
    User(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    ToolResult {
        id: String,
        content: String,
    },
    Assistant(String),
}

struct Model {
    /// Scene 1: time out once, after the tool ran.
    timeout_once: AtomicUsize,
    /// Scene 2: call the tool a second time.
    repeat_call: bool,
}

impl Model {
    fn next(&self, conversation: &[Message]) -> Result<Message, &'static str> {
        let results = conversation
            .iter()
            .filter(|m| matches!(m, Message::ToolResult { .. }))
            .count();
        if let Some(Message::ToolResult { content, .. }) = conversation.last()
            && content.starts_with("Error: it is not known")
        {
            return Ok(Message::Assistant(
                "I cannot tell whether the payment went through, so I will not try again; a person will check it.".into(),
            ));
        }
        if let Some(Message::ToolResult { content, .. }) = conversation.last()
            && content.starts_with("This operation needs a person's approval")
        {
            return Ok(Message::Assistant(
                "The payment of 42.00 EUR waits for your approval; I will charge the card once you have given it.".into(),
            ));
        }
        if let Some(Message::User(text)) = conversation.last()
            && text.contains("approved")
        {
            // Told to go on: the same charge, called anew.
            return Ok(Message::ToolCall {
                id: "call_3".into(),
                name: "charge_card".into(),
                arguments: r#"{"amount": 4200, "currency": "eur", "customer_id": "cus_42"}"#.into(),
            });
        }
        if results == 1 && self.timeout_once.swap(0, Ordering::SeqCst) == 1 {
            return Err("504 Gateway Timeout from the model provider");
        }
        Ok(match results {
            0 => Message::ToolCall {
                id: "call_1".into(),
                name: "charge_card".into(),
                arguments: r#"{"amount": 4200, "currency": "eur", "customer_id": "cus_42"}"#.into(),
            },
            // Unconvinced by the result, the model asks again: new id, other
            // formatting, same operation.
            1 if self.repeat_call => Message::ToolCall {
                id: "call_2".into(),
                name: "charge_card".into(),
                arguments: r#"{"customer_id":"cus_42","currency":"eur","amount":4200.0}"#.into(),
            },
            _ => Message::Assistant("The order is paid.".into()),
        })
    }
}

// ---------------------------------------------------------------------------
// The agent loop.

const RUN_ID: &str = "order-1001";

/// Runs one turn to the end. On a model error it retries the whole turn
/// from the checkpoint taken at its start, as agent frameworks do.
async fn run_turn(
    model: &Model,
    tools: &Tools,
    checkpoint: &[Message],
    on_tool_done: impl Fn(),
) -> Vec<Message> {
    'turn: loop {
        let mut conversation = checkpoint.to_vec();
        loop {
            match model.next(&conversation) {
                Err(e) => {
                    say("model", &format!("✗ {e}: retrying the turn from its start"));
                    continue 'turn;
                }
                Ok(Message::ToolCall {
                    id,
                    name,
                    arguments,
                }) => {
                    say("model", &format!("→ {name}({arguments})  [{id}]"));
                    let before = tools.shop().body_runs.load(Ordering::SeqCst);
                    let out = tools.call(RUN_ID, &name, &arguments).await;
                    let ran = tools.shop().body_runs.load(Ordering::SeqCst) > before;
                    let content = match &out {
                        Ok(v) => v.to_string(),
                        Err(e) => e.clone(),
                    };
                    let verdict = match (&out, ran) {
                        (Ok(_), true) => "✔ ran        ",
                        (Ok(_), false) if content.contains("verified_with_provider") => {
                            "✔ verified   "
                        }
                        (Ok(_), false) => "↺ replayed   ",
                        (Err(_), _) => "… not run    ",
                    };
                    say("tool", &format!("{verdict}→ {content}"));
                    conversation.push(Message::ToolCall {
                        id: id.clone(),
                        name,
                        arguments,
                    });
                    conversation.push(Message::ToolResult { id, content });
                    on_tool_done();
                }
                Ok(message) => {
                    if let Message::Assistant(text) = &message {
                        say("model", &format!("“{text}”"));
                    }
                    conversation.push(message);
                    return conversation;
                }
            }
        }
    }
}

fn say(who: &str, what: &str) {
    println!("   {who:<9}{what}");
}

fn report_charges(provider: &Provider) -> usize {
    let charges = provider.charges();
    let n = charges.len();
    let verdict = if n == 1 { "✔" } else { "✗ DOUBLE CHARGE" };
    let key = match charges.first().and_then(|c| c.idempotency_key.as_deref()) {
        Some(key) => format!("   (Idempotency-Key {}…)", &key[..key.len().min(24)]),
        None => String::new(),
    };
    println!(
        "   provider {n} charge{} {verdict}{key}",
        if n == 1 { "" } else { "s" }
    );
    n
}

// ---------------------------------------------------------------------------
// Setup: the store, from `--store`.

/// The demo: a scripted agent meets the three sources of duplicates.
#[derive(clap::Parser)]
pub(crate) struct Options {
    /// Run the same script without idem, to watch the double charges.
    #[arg(long)]
    naive: bool,
    /// Where the records go: sqlite, redis://.. or postgres://..
    #[arg(long, default_value = "sqlite")]
    store: String,
    /// The scene's folder (the demo passes it to its agent processes).
    #[arg(long, default_value = ".", hide = true)]
    dir: PathBuf,
    /// The scene's key namespace (likewise).
    #[arg(long, hide = true, default_value_t = format!("demo-{:x}", idem::store::LeaseToken::generate(0).id() as u32))]
    namespace: String,
    /// Which agent process this is (likewise).
    #[arg(long, hide = true)]
    pub(crate) phase: Option<String>,
    /// The payment provider takes no idempotency key: scene 3 is played
    /// under each policy for an uncertain outcome (rerun, verify, refuse).
    #[arg(long)]
    no_idempotency_keys: bool,
    /// The tool's policy for an uncertain outcome (the demo passes it to
    /// its agent processes).
    #[arg(long, hide = true, default_value = "rerun")]
    policy: String,
    /// Play the charge with `approval = "required"`: the agent asks, a
    /// person approves from another terminal (`idem approve`), and the
    /// retried turn charges once.
    #[arg(long)]
    approval: bool,
    /// With --approval: approve as NAME once asked, instead of waiting for
    /// a person (for a run nobody watches).
    #[arg(long, value_name = "NAME", requires = "approval")]
    approve_as: Option<String>,
}

async fn open_store(options: &Options) -> Result<Arc<dyn IdemStore>, BoxError> {
    let store: Arc<dyn IdemStore> = if options.store == "sqlite" {
        Arc::new(SqliteStore::open(options.dir.join("idem.db")).await?)
    } else if options.store.starts_with("redis") {
        Arc::new(RedisStore::connect(&options.store).await?)
    } else if options.store.starts_with("postgres") {
        Arc::new(PostgresStore::connect_with(&options.store, PostgresOptions::new()).await?)
    } else {
        return Err(format!(
            "unknown store {:?}: sqlite, redis://.. or postgres://..",
            options.store
        )
        .into());
    };
    Ok(store)
}

async fn tools(options: &Options) -> Result<Tools, BoxError> {
    let mut shop = Shop::with_provider(&options.dir, !options.no_idempotency_keys);
    shop.crash_after_charge = options.phase.as_deref() == Some("crash-in-body");
    if options.naive {
        return Ok(Tools::Naive(Arc::new(shop)));
    }
    let builder = Registry::builder(shop)
        .store(open_store(options).await?)
        .namespace(&options.namespace);
    let registry = match options.policy.as_str() {
        "verify" => builder.tool(charge_card_verified).build()?,
        "refuse" => builder.tool(charge_card_at_most_once).build()?,
        "approval" => builder.tool(charge_card_approved).build()?,
        _ => builder.tool(charge_card).build()?,
    };
    Ok(Tools::Idem(registry))
}

fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join("checkpoint.json")
}

// ---------------------------------------------------------------------------
// Scene 3 runs in child processes: `--phase crash` charges and dies before
// it can checkpoint; `--phase resume` starts from the checkpoint.

async fn child(options: &Options, phase: &str) -> Result<(), BoxError> {
    let tools = tools(options).await?;
    let model = Model {
        timeout_once: AtomicUsize::new(0),
        repeat_call: false,
    };
    let checkpoint: Vec<Message> =
        serde_json::from_str(&std::fs::read_to_string(checkpoint_path(&options.dir))?)?;
    let crash = phase == "crash";
    run_turn(&model, &tools, &checkpoint, || {
        if crash {
            // The charge went through and was recorded; the process dies
            // before it can save the turn.
            crash_here();
        }
    })
    .await;
    Ok(())
}

/// Stops here for the parent to kill the process.
fn crash_here() {
    println!("CRASH-HERE");
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(std::time::Duration::from_secs(60));
    }
}

fn run_child(options: &Options, phase: &str) -> Result<(), BoxError> {
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.args([
        "--phase",
        phase,
        "--store",
        &options.store,
        "--namespace",
        &options.namespace,
        "--policy",
        &options.policy,
    ])
    .arg("--dir")
    .arg(&options.dir)
    .stdout(Stdio::piped());
    if options.naive {
        cmd.arg("--naive");
    }
    if options.no_idempotency_keys {
        cmd.arg("--no-idempotency-keys");
    }
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if line == "CRASH-HERE" {
            child.kill()?; // SIGKILL: no destructors, no goodbyes
            child.wait()?;
            let when = if phase == "crash" {
                "☠ process killed after the charge, before its checkpoint"
            } else {
                "☠ process killed right after the charge, before idem recorded it"
            };
            say("agent", when);
            return Ok(());
        }
        println!("{line}");
    }
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("the resumed agent failed: {status}").into());
    }
    Ok(())
}

/// Scene 3 (scene `n`): an agent process charges and is killed (`crash`:
/// before its checkpoint; `crash-in-body`: before idem recorded the
/// charge); a second resumes from the checkpoint. Returns the charges.
async fn crash_scene(
    options: &mut Options,
    scratch: &Path,
    (n, crash): (u32, &str),
    user: &[Message],
    title: &str,
) -> Result<usize, BoxError> {
    println!(
        "\n── {}. {title}",
        if n == 3 {
            "3".into()
        } else {
            format!("3{}", (b'a' + (n - 30) as u8) as char)
        }
    );
    scene_dir(options, scratch, n).await?;
    std::fs::write(checkpoint_path(&options.dir), serde_json::to_string(user)?)?;
    say("agent", "checkpoint saved; starting agent process #1");
    run_child(options, crash)?;
    say("agent", "starting agent process #2 from the checkpoint");
    run_child(options, "resume")?;
    Ok(report_charges(&Provider {
        dir: options.dir.clone(),
        keys: !options.no_idempotency_keys,
    }))
}

/// `--approval`: the agent calls the charge, which waits for a person
/// (`approval_wait`); a person approves that very operation (`idem
/// approve`, from another terminal; or `--approve-as`), and the waiting
/// call charges once and answers; a retry of that turn replays the charge.
async fn approval_scene(
    options: &mut Options,
    scratch: &Path,
    user: &[Message],
) -> Result<(), BoxError> {
    println!("── A person approves the charge before it runs (approval = \"required\")");
    scene_dir(options, scratch, 4).await?;
    options.policy = "approval".into();
    let tools = tools(options).await?;
    let Tools::Idem(registry) = &tools else {
        return Err("--approval needs idem: drop --naive".into());
    };
    let model = Model {
        timeout_once: AtomicUsize::new(0),
        repeat_call: false,
    };
    let args = json!({"amount": 4200, "currency": "eur", "customer_id": "cus_42"});
    let (key, _) = registry
        .identify(RUN_ID, "charge_card", args)?
        .ok_or("charge_card is a write tool")?;
    let store = match options.store.as_str() {
        "sqlite" => options.dir.join("idem.db").display().to_string(),
        url => url.to_owned(),
    };
    say(
        "person",
        &format!(
            "the charge waits; in another terminal: idem approve --store {store} {key} --by you"
        ),
    );
    let approve = async {
        let Some(name) = &options.approve_as else {
            return Ok::<(), BoxError>(());
        };
        until_it_awaits(registry, &key).await?;
        registry.approve(&key, name).await?;
        say("person", "approved that very charge, while the call waited");
        Ok(())
    };
    let (_, approved) = tokio::join!(run_turn(&model, &tools, user, || {}), approve);
    approved?;
    say(
        "agent",
        "retrying that turn from its start (a timeout, say): the charge is replayed",
    );
    run_turn(&model, &tools, user, || {}).await;
    match report_charges(&tools.shop().provider) {
        1 => {
            println!("\nOne approval, one charge: the retried turn replayed it.");
            Ok(())
        }
        n => Err(format!("{n} charges after one approval: this is a bug in idem").into()),
    }
}

/// Waits, up to a minute, until the operation under `key` awaits a
/// person's approval (the agent's call has asked).
async fn until_it_awaits(registry: &Registry<Shop>, key: &IdemKey) -> Result<(), BoxError> {
    for _ in 0..600 {
        let record = registry.store().inspect(key).await?;
        if record.is_some_and(|r| r.state == idem::store::RecordState::Awaiting) {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Err("the charge never came to await approval".into())
}

/// The verdict of `--no-idempotency-keys`: only `rerun` may charge twice
/// after the crash (scene 30); anything else is a bug.
fn without_keys(total: &BTreeMap<u32, usize>) -> Result<(), BoxError> {
    println!();
    let doubled: Vec<_> = total
        .iter()
        .filter(|(_, n)| **n != 1)
        .map(|(s, _)| *s)
        .collect();
    if doubled == [30] {
        println!(
            "Without idempotency keys downstream, rerun charged twice after the crash; verify asked the provider and refuse left it to a person: one charge each."
        );
        Ok(())
    } else {
        Err(format!("scenes {doubled:?} charged other than expected: this is a bug in idem").into())
    }
}

// ---------------------------------------------------------------------------

/// Runs the demo (or, with `--phase`, one of its agent processes).
pub(crate) async fn main(mut options: Options) -> Result<(), BoxError> {
    if let Some(phase) = options.phase.clone() {
        return child(&options, &phase).await;
    }
    let scratch = std::env::temp_dir().join(format!("idem-demo-{}", std::process::id()));
    let result = demo(&mut options, &scratch).await;
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

async fn scene_dir(options: &mut Options, scratch: &Path, n: u32) -> Result<(), BoxError> {
    options.dir = scratch.join(format!("scene-{n}"));
    std::fs::create_dir_all(&options.dir)?;
    options.namespace = format!(
        "demo-{:x}-{n}",
        idem::store::LeaseToken::generate(0).id() as u32
    );
    Ok(())
}

async fn demo(options: &mut Options, scratch: &Path) -> Result<(), BoxError> {
    let store = if options.naive {
        "none (--naive)".to_owned()
    } else {
        options.store.clone()
    };
    println!("idem demo: one order, one charge of 42.00 EUR. Store: {store}.\n");
    let user = vec![Message::User(
        "Please pay order 1001 (42.00 EUR, customer cus_42).".into(),
    )];
    let mut total = BTreeMap::new();
    if options.approval && !options.naive {
        return approval_scene(options, scratch, &user).await;
    }

    println!("── 1. Our retry after a model-provider timeout replays the whole turn");
    scene_dir(options, scratch, 1).await?;
    let tools1 = tools(options).await?;
    let model = Model {
        timeout_once: AtomicUsize::new(1),
        repeat_call: false,
    };
    run_turn(&model, &tools1, &user, || {}).await;
    total.insert(1, report_charges(&tools1.shop().provider));

    println!("\n── 2. The model calls charge_card again, with a new tool_call_id");
    scene_dir(options, scratch, 2).await?;
    let tools2 = tools(options).await?;
    let model = Model {
        timeout_once: AtomicUsize::new(0),
        repeat_call: true,
    };
    run_turn(&model, &tools2, &user, || {}).await;
    total.insert(2, report_charges(&tools2.shop().provider));

    if options.no_idempotency_keys && !options.naive {
        // The crash under each policy: scene 30 reruns, 31 verifies, 32
        // refuses.
        for (n, policy) in [(30, "rerun"), (31, "verify"), (32, "refuse")] {
            options.policy = policy.to_owned();
            let title = format!("on_uncertain {policy}, a provider without idempotency keys");
            let scene = crash_scene(options, scratch, (n, "crash-in-body"), &user, &title);
            total.insert(n, scene.await?);
        }
        return without_keys(&total);
    }
    let title = "The agent process crashes after the charge and resumes from its checkpoint";
    total.insert(
        3,
        crash_scene(options, scratch, (3, "crash"), &user, title).await?,
    );

    let doubled: Vec<_> = total
        .iter()
        .filter(|(_, n)| **n != 1)
        .map(|(s, _)| *s)
        .collect();
    println!();
    if options.naive {
        println!("Without idem, scenes {doubled:?} charged the customer more than once.");
        println!("Run it without --naive to see each duplicate made harmless.");
        Ok(())
    } else if doubled.is_empty() {
        println!("With idem: every duplicate replayed the first result; one charge per order.");
        Ok(())
    } else {
        Err(format!("scenes {doubled:?} charged more than once: this is a bug in idem").into())
    }
}
