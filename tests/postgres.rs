//! `PostgresStore` against the machine's PostgreSQL: the conformance suite
//! in a schema of its own per case (dropped afterwards), schema versioning
//! and migrations, malformed rows, purging.
#![cfg(feature = "postgres")]

mod support;

use std::sync::Arc;
use std::time::Duration;

use idem::prelude::*;
use idem::testing::{Counter, Harness};
use idem::{Fingerprint, PostgresOptions, PostgresStore, WriteOptions};
use serde_json::json;

struct PgHarness {
    store: Arc<PostgresStore>,
    client: tokio_postgres::Client,
    schema: String,
    /// Where the store connects, as whom.
    url: String,
}

impl PgHarness {
    async fn new() -> Option<PgHarness> {
        let (client, schema) = support::postgres_schema().await?;
        let options = PostgresOptions::new().schema(&schema);
        let store = PostgresStore::connect_with(&support::postgres_url(), options)
            .await
            .expect("connect");
        Some(PgHarness {
            store: Arc::new(store),
            client,
            schema,
            url: support::postgres_url(),
        })
    }
}

impl Harness for PgHarness {
    type Store = PostgresStore;

    fn store(&self) -> Arc<PostgresStore> {
        self.store.clone()
    }

    fn server(&self) -> Option<std::net::SocketAddr> {
        support::url_server(&self.url)
    }

    async fn store_via(&self, addr: std::net::SocketAddr) -> Arc<PostgresStore> {
        let url = support::url_via(&self.url, addr);
        let options = PostgresOptions::new()
            .schema(&self.schema)
            .purge_interval(None);
        let store = PostgresStore::connect_with(&url, options)
            .await
            .expect("connect through the proxy");
        Arc::new(store)
    }

    async fn corrupt(&self, key: &IdemKey, _: &Fingerprint) {
        let sql = format!(
            "INSERT INTO {{table}} VALUES ('{}', 'bogus', '\\x00', 0, NULL, NULL, NULL, now() + interval '1 hour')
             ON CONFLICT (key) DO UPDATE SET state = 'bogus'",
            key.as_str()
        );
        self.store
            .execute_raw(&sql)
            .await
            .expect("plant a malformed row");
    }

    async fn cleanup(&self) {
        let _ = self
            .client
            .batch_execute(&format!("DROP SCHEMA {} CASCADE", self.schema))
            .await;
    }
}

mod conformance {
    idem::conformance_tests!(super::PgHarness::new());
}

#[tokio::test]
async fn migrations_and_schema_versions() {
    let Some(h) = PgHarness::new().await else {
        return;
    };
    let url = support::postgres_url();
    // Without create_schema, a missing table is a clear error...
    let manual = PostgresOptions::new()
        .schema(&h.schema)
        .table("by_hand")
        .create_schema(false);
    let err = PostgresStore::connect_with(&url, manual.clone())
        .await
        .expect_err("no table yet");
    assert!(err.to_string().contains("schema_sql"), "{err}");
    // ...and the offered SQL is the migration.
    let sql = PostgresStore::schema_sql(&manual).expect("sql");
    h.client
        .batch_execute(&sql)
        .await
        .expect("run the migration");
    PostgresStore::connect_with(&url, manual)
        .await
        .expect("connects after the migration");
    // A newer schema than the code is refused.
    h.client
        .batch_execute(&format!(
            "UPDATE {}.idem_records_schema SET version = 9",
            h.schema
        ))
        .await
        .expect("bump");
    let err = PostgresStore::connect_with(&url, PostgresOptions::new().schema(&h.schema))
        .await
        .expect_err("newer schema");
    assert!(err.to_string().contains("version 9"), "{err}");
    // Table names are checked, never spliced in raw.
    assert!(PostgresStore::schema_sql(&PostgresOptions::new().table("x; DROP TABLE y")).is_err());
    h.cleanup().await;
}

/// The statements the guide gives (src/guide/security.md, "Least
/// privilege") for `role` on the table in `schema`: those on the role and
/// schema, and those on the table.
fn readme_grants(role: &str, schema: &str) -> (String, String) {
    let readme = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/guide/security.md"
    ))
    .expect("read src/guide/security.md");
    let start = readme
        .find("CREATE ROLE idem_app")
        .expect("the guide gives the role");
    let block = &readme[start..start + readme[start..].find("```").expect("end of block")];
    let block = block
        .replace("idem_app", role)
        .replace("SCHEMA public", &format!("SCHEMA {schema}"))
        .replace(" idem_records", &format!(" {schema}.idem_records"));
    let (on_table, before): (Vec<&str>, Vec<&str>) =
        block.lines().partition(|l| l.contains(".idem_records"));
    (before.join("\n"), on_table.join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_create_runs_the_suite_once_the_table_exists() {
    let Some((client, schema)) = support::postgres_schema().await else {
        return;
    };
    let role = format!("{schema}_app");
    let admin_url = support::postgres_url();
    let (scheme, rest) = admin_url.split_once("://").expect("a URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let role_url = format!("{scheme}://{role}@{host}");
    let options = PostgresOptions::new().schema(&schema);
    let (role_grants, table_grants) = readme_grants(&role, &schema);
    client
        .batch_execute(&role_grants)
        .await
        .expect("the README's role");

    // The role may not create the table: a clear error.
    let err = PostgresStore::connect_with(&role_url, options.clone())
        .await
        .expect_err("no table, no CREATE");
    assert!(err.to_string().contains("permission denied"), "{err}");
    // The deploy step, by a role that may; then the grants on the table.
    PostgresStore::migrate(&admin_url, &options)
        .await
        .expect("migrate");
    client
        .batch_execute(&table_grants)
        .await
        .expect("the README's grants");

    let store = PostgresStore::connect_with(&role_url, options)
        .await
        .expect("connect as the role");
    let harness = PgHarness {
        store: Arc::new(store),
        client,
        schema,
        url: role_url,
    };
    idem::testing::run_all(&harness).await;
    harness.cleanup().await;
    harness
        .client
        .batch_execute(&format!("DROP ROLE {role}"))
        .await
        .expect("DROP ROLE");
}

#[tokio::test]
async fn malformed_rows_are_errors_not_runs() {
    let Some(h) = PgHarness::new().await else {
        return;
    };
    let rows = [
        "'bogus', '\\x00', 0, NULL, NULL, NULL",
        "'done', '\\x00', 0, NULL, NULL, '1'",
        "'done', decode(repeat('00', 32), 'hex'), 0, NULL, NULL, NULL",
        // Running without a lease: corrupt, as every backend calls it, not
        // in flight until it expires.
        "'running', decode(repeat('00', 32), 'hex'), 0, decode(repeat('00', 16), 'hex'), NULL, NULL",
    ];
    let store = h.store();
    idem::testing::malformed_records_are_refused(h.store(), rows.len(), |i, key| {
        let (store, row) = (store.clone(), rows[i]);
        async move {
            store
                .execute_raw(&format!(
                    "INSERT INTO {{table}} VALUES ('{}', {row}, now() + interval '1 hour')",
                    key.as_str()
                ))
                .await
                .expect("plant");
        }
    })
    .await;
    h.cleanup().await;
}

#[tokio::test]
async fn a_background_task_purges_expired_rows() {
    let Some(h) = PgHarness::new().await else {
        return;
    };
    let store = PostgresStore::connect_with(
        &support::postgres_url(),
        PostgresOptions::new()
            .schema(&h.schema)
            .table("purged")
            .purge_interval(Some(Duration::from_millis(50))),
    )
    .await
    .expect("connect");
    let registry = Registry::builder(())
        .store(store)
        .tool(Counter::new(
            Duration::ZERO,
            WriteOptions::new().ttl(Duration::from_millis(20)),
        ))
        .build()
        .expect("registry");
    for n in 0..10 {
        registry
            .call("r", "counter", json!({ "n": n }))
            .await
            .expect("call");
    }
    let count = format!("SELECT count(*) FROM {}.purged", h.schema);
    let mut left = -1;
    for _ in 0..200 {
        let row = h.client.query_one(&count, &[]).await.expect("count");
        left = row.get::<_, i64>(0);
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left, 0, "the purge task emptied the table of expired rows");
    h.cleanup().await;
}

/// Terminates every backend whose `application_name` is `app`, as an
/// operator or a failover would; returns how many.
async fn terminate_backends(client: &tokio_postgres::Client, app: &str) -> i64 {
    client
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
            &[&app],
        )
        .await
        .expect("terminate backends")
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_backends_lose_nothing() {
    let Some(h) = PgHarness::new().await else {
        return;
    };
    // The store's connections carry a name of their own, so that only
    // they are terminated.
    let app = format!(
        "idem_fault_{:x}",
        idem::store::LeaseToken::generate(0).id() as u64
    );
    let url = format!("{}?application_name={app}", support::postgres_url());
    let options = PostgresOptions::new()
        .schema(&h.schema)
        .purge_interval(None);
    let store = PostgresStore::connect_with(&url, options)
        .await
        .expect("connect");
    let counter = Counter::new(Duration::from_millis(300), WriteOptions::new());
    let registry = Registry::builder(())
        .store(store)
        .tool(counter.clone())
        .build()
        .expect("registry");
    let call = |n: u64| {
        let registry = registry.clone();
        tokio::spawn(async move { registry.call("r", "counter", json!({ "n": n })).await })
    };

    // Between calls: the pool's idle connections are terminated.
    call(1).await.expect("task").expect("first call");
    assert!(terminate_backends(&h.client, &app).await > 0);
    let second = call(2)
        .await
        .expect("task")
        .expect("a claim after the termination");

    // While a body runs: its record goes over a new connection.
    let third = call(3);
    while counter.total() < 3 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(terminate_backends(&h.client, &app).await > 0);
    let third = third.await.expect("task").expect("the result is recorded");

    for (n, out) in [(2, second), (3, third)] {
        let replay = call(n).await.expect("task").expect("replay");
        assert_eq!(replay, out, "operation {n} was recorded");
    }
    assert_eq!(counter.total(), 3, "each operation ran once");
    h.cleanup().await;
}

/// The table on a tablespace of its own, on a small filesystem that fills
/// up (`disk_full`, SQLSTATE 53100): a full store, waited out. On a
/// PostgreSQL of the test's own: filling a disk and dropping a tablespace
/// (which forces a checkpoint) are not for the machine's server, whose
/// other tests would stall, and a tablespace left on an unmounted
/// filesystem would stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_is_waited_out() {
    // Dropped in the reverse order: the server stops before the
    // filesystem under its tablespace goes.
    let Some(disk) = support::SmallDisk::mount(4096, Some("postgres")) else {
        return;
    };
    let disk = Arc::new(disk);
    let Some(server) = support::PgServer::start("full") else {
        return;
    };
    let url = server.url("full");
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test's PostgreSQL");
    tokio::spawn(connection);
    let options = PostgresOptions::new().purge_interval(None);
    let store = PostgresStore::connect_with(&url, options)
        .await
        .expect("connect");
    // One statement each: CREATE TABLESPACE runs outside a transaction.
    for sql in [
        format!("CREATE TABLESPACE small LOCATION '{}'", disk.path.display()),
        "ALTER TABLE idem_records SET TABLESPACE small".to_owned(),
        "ALTER TABLE idem_records SET (autovacuum_enabled = false)".to_owned(),
    ] {
        client
            .batch_execute(&sql)
            .await
            .expect("the table on the small filesystem");
    }
    let client = Arc::new(client);
    let (filler, filling) = (disk.clone(), client.clone());
    // Full: the filesystem, then every page of the table, with live rows
    // (a dead row's space would be reclaimed by the next update).
    let fill = move || {
        filler.fill();
        let insert = |payload: usize| {
            format!(
                "INSERT INTO idem_records (key, state, fingerprint, attempt, payload, expires_at)
                 VALUES (gen_random_uuid()::text, 'done', '\\x00', 0, repeat('x', {payload}),
                         now() + interval '1 hour')"
            )
        };
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async {
                // Large rows, then small ones for the space they leave.
                for payload in [1500, 0] {
                    while filling.batch_execute(&insert(payload)).await.is_ok() {}
                }
            })
        });
    };
    idem::testing::cases::full_store_is_waited_out(Arc::new(store), fill, || disk.free()).await;
}

/// A store connecting to a server that accepts the connection and then
/// says nothing (a black hole through the proxy: a frozen network path)
/// is told so, instead of waiting forever (a worker restarted in the
/// middle of such a fault hung, in the chaos run); once the path is back,
/// it connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_to_a_silent_server_fails_and_then_succeeds() {
    let Some((client, schema)) = support::postgres_schema().await else {
        return;
    };
    let server = support::url_server(&support::postgres_url()).expect("the server's address");
    let proxy = idem::testing::Proxy::start(server).await.expect("a proxy");
    let url = support::url_via(&support::postgres_url(), proxy.addr());
    let options = || PostgresOptions::new().schema(&schema);
    proxy.black_hole();
    // A guard against a hang: the store's own bound is far shorter.
    let connecting = PostgresStore::connect_with(&url, options());
    let silent = tokio::time::timeout(Duration::from_secs(300), connecting)
        .await
        .expect("connecting ends");
    let error = silent.expect_err("a silent server is no store");
    assert!(
        error.to_string().contains("did not answer"),
        "it says why: {error}"
    );
    proxy.forward();
    PostgresStore::connect_with(&url, options())
        .await
        .expect("the path is back");
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop the schema");
}
