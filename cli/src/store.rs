//! The store a command reads, opened from its URL: Redis (`redis://`,
//! `rediss://`), PostgreSQL (`postgres://`, `postgresql://`) or a SQLite
//! file (a path, `sqlite://PATH` or `sqlite:PATH`). Opened to read, a PostgreSQL table or a SQLite file that is not
//! there is an error, never created; opened to serve (`idem gateway`), it
//! is created as a registry's store is.

use std::path::Path;
use std::sync::Arc;

use clap::Args;
use idem::{IdemStore, PostgresOptions, PostgresStore, RedisStore, SqliteStore};

/// Where the records are.
#[derive(Args, Clone)]
pub(crate) struct StoreUrl {
    /// The store: redis://.., rediss://.., postgres://.., or a SQLite file
    /// (a path, sqlite://PATH or sqlite:PATH).
    #[arg(long = "store", env = "IDEM_STORE", value_name = "URL")]
    url: String,
    /// Redis: the URL is a node of a Redis Cluster (`list` and `stats` then
    /// scan every primary).
    #[arg(long)]
    cluster: bool,
    /// PostgreSQL: the table (as `PostgresOptions::table`).
    #[arg(long, default_value = "idem_records")]
    table: String,
    /// PostgreSQL: the schema, if not the search path's.
    #[arg(long)]
    schema: Option<String>,
}

impl StoreUrl {
    /// The store, to read: nothing is created.
    pub(crate) async fn open(&self) -> Result<Arc<dyn IdemStore>, String> {
        self.open_to(false).await
    }

    /// The store, to serve calls: a SQLite file or a PostgreSQL table
    /// that is not there is created, and PostgreSQL purges expired
    /// records as a registry's store does.
    pub(crate) async fn open_to_serve(&self) -> Result<Arc<dyn IdemStore>, String> {
        self.open_to(true).await
    }

    async fn open_to(&self, serve: bool) -> Result<Arc<dyn IdemStore>, String> {
        let url = self.url.as_str();
        let unreachable =
            |e: &dyn std::fmt::Display| format!("cannot open the store at {}: {e}", redact(url));
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            let store = if self.cluster {
                RedisStore::connect_cluster([url]).await
            } else {
                RedisStore::connect(url).await
            };
            return Ok(Arc::new(store.map_err(|e| unreachable(&e))?));
        }
        if self.cluster {
            return Err("--cluster is for redis:// and rediss:// URLs".into());
        }
        if is_postgres(url) {
            let options = self.postgres_options(serve);
            let store = PostgresStore::connect_with(url, options)
                .await
                .map_err(|e| unreachable(&e))?;
            return Ok(Arc::new(store));
        }
        let url = sqlite_path(url)?;
        if !serve && !Path::new(url).is_file() {
            return Err(format!("no SQLite file at {url}"));
        }
        let store = SqliteStore::open(url).await.map_err(|e| unreachable(&e))?;
        Ok(Arc::new(store))
    }

    /// The PostgreSQL table's options: created or brought up to date when
    /// `serve`, else only read (and never purged).
    fn postgres_options(&self, serve: bool) -> PostgresOptions {
        let mut options = PostgresOptions::new()
            .table(self.table.clone())
            .create_schema(serve);
        if !serve {
            options = options.purge_interval(None);
        }
        if let Some(schema) = &self.schema {
            options = options.schema(schema.clone());
        }
        options
    }

    /// `idem migrate`: creates what the store needs (a PostgreSQL table
    /// and its index, at this version's schema, bringing an older one up
    /// to it; a SQLite file and its table), or with `print_sql` only
    /// prints the SQL a PostgreSQL database would be given, for a DBA to
    /// apply. What was done, to say.
    pub(crate) async fn migrate(&self, print_sql: bool) -> Result<String, String> {
        let url = self.url.as_str();
        if is_postgres(url) {
            let options = self.postgres_options(true);
            if print_sql {
                return PostgresStore::schema_sql(&options).map_err(|e| e.to_string());
            }
            PostgresStore::migrate(url, &options)
                .await
                .map_err(|e| format!("cannot migrate the store at {}: {e}", redact(url)))?;
            let version = PostgresStore::SCHEMA_VERSION;
            let table = match &self.schema {
                Some(schema) => format!("{schema}.{}", self.table),
                None => self.table.clone(),
            };
            return Ok(format!("the table {table} is at schema version {version}"));
        }
        if print_sql {
            return Err(
                "--print-sql is for a PostgreSQL store: Redis needs no schema, and a \
                        SQLite file is created with its table by `idem migrate` or the first \
                        registry or gateway that opens it"
                    .into(),
            );
        }
        if url.starts_with("redis://") || url.starts_with("rediss://") {
            return Ok("Redis needs no migration: its records are keys".into());
        }
        self.open_to_serve().await?;
        Ok(format!(
            "the SQLite file {} holds idem's table",
            sqlite_path(url)?
        ))
    }
}

fn is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The SQLite file `url` names: a path, `sqlite://PATH` or `sqlite:PATH`
/// (as SQLx and SQLAlchemy-style URLs name it: `sqlite:///abs/path` is
/// `/abs/path`, `sqlite://rel/path` a relative one), or why it names none.
fn sqlite_path(url: &str) -> Result<&str, String> {
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    if path.contains("://") || path.is_empty() {
        return Err(format!(
            "unknown store URL {}: give redis://.., rediss://.., postgres://.., or a SQLite \
             file (a path, sqlite://PATH or sqlite:PATH)",
            redact(url)
        ));
    }
    Ok(path)
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((userinfo, host)) => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}")
        }
        None => url.to_owned(),
    }
}

/// Tells the calls waiting on `key`, in every process, that a decision on
/// its record is written ([`IdemStore::announce`]); a failure is only
/// warned of: the decision stands, and they see it when they next look.
pub(crate) async fn announce(store: &dyn IdemStore, key: &idem::IdemKey) {
    if let Err(e) = store.announce(key).await {
        eprintln!(
            "idem: warning: could not announce it to the calls waiting on {key} ({e}); they see it when they next look"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sqlite_file_is_named_by_its_path_or_a_sqlite_url() {
        assert_eq!(sqlite_path("records.sqlite"), Ok("records.sqlite"));
        assert_eq!(sqlite_path("sqlite:records.sqlite"), Ok("records.sqlite"));
        assert_eq!(sqlite_path("sqlite://rel/r.db"), Ok("rel/r.db"));
        assert_eq!(sqlite_path("sqlite:///var/lib/r.db"), Ok("/var/lib/r.db"));
        for refused in ["mysql://h/db", "sqlite://", "sqlite:"] {
            let error = sqlite_path(refused).expect_err(refused);
            assert!(error.contains("sqlite://PATH or sqlite:PATH"), "{error}");
        }
    }
}
