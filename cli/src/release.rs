//! `release`: end a stuck claim with the store's own fenced release, on
//! the holder's token: given (`--token`, from `show`) or read from the
//! record (`--force`, confirmed when the lease is still live). A worker
//! still holding the lease then gets `LeaseLost` and records nothing; if
//! the worker records first, the release changes nothing. Every release is
//! logged on stderr.

use std::io::{BufRead, IsTerminal, Write};

use idem::store::Outcome;
use idem::store::{LeaseToken, RecordState};
use idem::{IdemKey, IdemStore, StoreError};

use crate::record::{human, inspected};

/// How the holder's token is known.
pub(crate) enum Holder {
    /// Given, as `show` prints it (32 hex digits).
    Token(String),
    /// Read from the record; `yes` skips the confirmation.
    Force { yes: bool },
}

impl Holder {
    /// As `idem release` is told: `--token`, unless `--force` (with
    /// `--yes`) overrides it.
    pub(crate) fn of(token: Option<String>, force: bool, yes: bool) -> Holder {
        match token {
            Some(token) if !force => Holder::Token(token),
            _ => Holder::Force { yes },
        }
    }
}

pub(crate) async fn release(
    store: &dyn IdemStore,
    key: &IdemKey,
    holder: Holder,
) -> Result<(), String> {
    let record = inspected(store, key).await?;
    if record.state != RecordState::Running {
        return Err(format!(
            "{key} is {}, not running: there is no claim to release",
            record.state
        ));
    }
    let current = record
        .holder
        .ok_or_else(|| format!("{key} is running without a holder"))?;
    let live = record.lease_left.filter(|left| !left.is_zero());
    let how = match holder {
        Holder::Token(_) => "with the holder's token",
        Holder::Force { .. } => "forced",
    };
    let token = match holder {
        Holder::Token(hex) => {
            let id = u128::from_str_radix(&hex, 16)
                .ok()
                .filter(|_| hex.len() == 32)
                .ok_or_else(|| format!("--token {hex:?} is not 32 hex digits"))?;
            LeaseToken::from_parts(id, record.attempt)
        }
        Holder::Force { yes } => {
            if let Some(left) = live
                && !yes
            {
                confirm(&format!(
                    "the lease on {key} is live for another {} (its worker may still be running the tool)",
                    human(left)
                ))?;
            }
            current
        }
    };
    match store.settle(key, &token, Outcome::Released).await {
        Ok(()) => {
            eprintln!(
                "idem: released {key} {how} (tool {}, attempt {}, holder {}, lease {})",
                record.tool.as_deref().unwrap_or("-"),
                record.attempt,
                token.id_hex(),
                live.map_or("lapsed".into(), |left| format!(
                    "live, {} left",
                    human(left)
                )),
            );
            crate::store::announce(store, key).await;
            Ok(())
        }
        Err(StoreError::LeaseLost) => Err(format!(
            "{key} was not released: the claim is no longer held by {} (the worker recorded, \
             or another claim took over)",
            token.id_hex()
        )),
        Err(e) => Err(format!("cannot release {key}: {e}")),
    }
}

/// Asks whether to release despite `reason` on the terminal; an error
/// unless the answer is yes.
fn confirm(reason: &str) -> Result<(), String> {
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "{reason}: not released without a confirmation, and stdin is not a terminal to ask (give --yes)"
        ));
    }
    eprint!("{reason}. Release it anyway? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| format!("cannot read the answer: {e}"))?;
    match answer.trim() {
        "y" | "Y" | "yes" => Ok(()),
        _ => Err("not released".into()),
    }
}
