//! `PostgresStore` over TLS (feature `postgres-tls`) against a PostgreSQL
//! server of the test's own, with a certificate from a private CA and
//! password authentication: every `sslmode` does what libpq's does, and the
//! password never appears in an error or a log line. Alone in its own test
//! binary: it captures every log level, and tracing caches per-callsite
//! interest process-wide.
#![cfg(feature = "postgres-tls")]

mod support;

use idem::testing::Counter;
use idem::{PostgresOptions, PostgresStore, Registry};
use serde_json::json;
use support::{Certs, Logs, PgServer};

const PASSWORD: &str = "pg-S3CRET-41d9";
const WRONG_PASSWORD: &str = "hunter2-S3CRET-77c1";

/// The test's server: its URL for `sslmode` (with `more` parameters), as
/// user `idem` with `password`, on `host`.
struct Server {
    pg: PgServer,
    certs: Certs,
}

impl Server {
    fn url(&self, host: &str, password: &str, mode: &str, more: &str) -> String {
        format!(
            "postgres://idem:{password}@{host}:{}/postgres?sslmode={mode}&application_name=idem_{}{more}",
            self.pg.port,
            mode.replace('-', "_")
        )
    }

    fn with_ca(&self) -> PostgresOptions {
        PostgresOptions::new()
            .tls_root_ca(self.certs.ca_pem())
            .purge_interval(None)
    }

    /// Whether every connection named `idem_<mode>` is encrypted, and
    /// there is one.
    async fn encrypted(&self, mode: &str) -> bool {
        let admin = format!(
            "host=127.0.0.1 port={} user=idem password={PASSWORD} dbname=postgres sslmode=disable",
            self.pg.port
        );
        let (client, connection) = tokio_postgres::connect(&admin, tokio_postgres::NoTls)
            .await
            .expect("admin connection");
        tokio::spawn(connection);
        let row = client
            .query_one(
                "SELECT count(*), coalesce(bool_and(s.ssl), false) FROM pg_stat_ssl s
                 JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
                &[&format!("idem_{}", mode.replace('-', "_"))],
            )
            .await
            .expect("pg_stat_ssl");
        assert!(row.get::<_, i64>(0) > 0, "no connection for sslmode {mode}");
        row.get(1)
    }
}

/// A write runs once in `run` and replays over `store`; the registry,
/// which keeps the store's connections open.
async fn runs_once(store: PostgresStore, run: &str) -> Registry<()> {
    let counter = Counter::default();
    let registry = Registry::builder(())
        .store(store)
        .tool(counter.clone())
        .build()
        .expect("registry");
    for _ in 0..2 {
        registry
            .call(run, "counter", json!({"n": 1}))
            .await
            .expect("a call");
    }
    assert_eq!(counter.total(), 1);
    registry
}

#[tokio::test]
async fn every_sslmode_against_a_private_ca_and_the_password_nowhere() {
    let (logs, _guard) = Logs::capture(tracing::Level::TRACE);
    let Some(certs) = Certs::generate() else {
        return;
    };
    let Some(pg) = PgServer::start_tls(&certs, PASSWORD) else {
        return;
    };
    let server = Server { pg, certs };
    modes_connect_as_libpq_says(&server).await;
    let errors = refusals(&server).await;

    let logs = logs.text();
    assert!(
        logs.contains("claim acquired"),
        "the logs were captured:\n{logs}"
    );
    for secret in [PASSWORD, WRONG_PASSWORD] {
        assert!(!logs.contains(secret), "a password in the logs:\n{logs}");
        for e in &errors {
            assert!(!e.contains(secret), "a password in an error: {e}");
        }
    }
}

/// Each mode connects, runs a write once, and is encrypted unless
/// `disable`.
async fn modes_connect_as_libpq_says(server: &Server) {
    let ca_file = server.certs.dir.0.join("ca.crt");
    let cases = [
        ("disable", "", server.with_ca()),
        // No root needed: encrypted, the certificate not checked.
        ("prefer", "", PostgresOptions::new()),
        ("require", "", PostgresOptions::new()),
        ("verify-ca", "", server.with_ca()),
        // The root from the URL, as libpq reads it.
        (
            "verify-full",
            &*format!("&sslrootcert={}", ca_file.display()),
            PostgresOptions::new(),
        ),
    ];
    for (mode, more, options) in cases {
        let url = server.url("127.0.0.1", PASSWORD, mode, more);
        let store = PostgresStore::connect_with(&url, options.purge_interval(None))
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        let _open = runs_once(store, mode).await;
        assert_eq!(
            server.encrypted(mode).await,
            mode != "disable",
            "sslmode={mode}"
        );
    }
}

/// What must be refused, each with an error that says why; their texts.
async fn refusals(server: &Server) -> Vec<String> {
    let mut errors = Vec::new();
    let mut refused = async |url: String, options: PostgresOptions, why: &str| {
        let e = PostgresStore::connect_with(&url, options.purge_interval(None))
            .await
            .err()
            .unwrap_or_else(|| panic!("connected, though {why}"))
            .to_string();
        errors.push(e);
    };
    // The private CA is not among the platform's roots.
    for mode in ["verify-ca", "verify-full"] {
        let url = server.url("127.0.0.1", PASSWORD, mode, "");
        refused(url, PostgresOptions::new(), "the CA is unknown").await;
    }
    // The certificate names 127.0.0.1, not localhost: verify-full refuses
    // it, verify-ca does not look.
    let url = server.url("localhost", PASSWORD, "verify-full", "");
    refused(url, server.with_ca(), "the name does not match").await;
    let url = server.url("localhost", PASSWORD, "verify-ca", "");
    let store = PostgresStore::connect_with(&url, server.with_ca())
        .await
        .expect("verify-ca ignores the name");
    runs_once(store, "localhost").await;
    // A wrong password, over TLS and not.
    for mode in ["verify-full", "disable"] {
        let url = server.url("127.0.0.1", WRONG_PASSWORD, mode, "");
        refused(url, server.with_ca(), "the password is wrong").await;
    }
    // A malformed URL holding a password.
    let url = format!("postgres://idem:{WRONG_PASSWORD}@127.0.0.1:notaport/postgres");
    refused(url, PostgresOptions::new(), "the URL is malformed").await;
    assert!(
        errors
            .iter()
            .any(|e| e.contains("password authentication failed")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.contains("certificate")),
        "{errors:?}"
    );
    errors
}
