//! "Did you mean": the name among those known that a given one is most
//! likely a misspelling of, for the gateway's refusals of a setting for a
//! tool the upstream does not list, or of a condition's unknown field.

/// The name among `names` that `given` is most likely a misspelling of:
/// at most two edits away (one for a name of four letters or fewer).
pub(super) fn closest<'n>(given: &str, names: &[&'n str]) -> Option<&'n str> {
    let most = if given.chars().count() <= 4 { 1 } else { 2 };
    names
        .iter()
        .map(|name| (edits(given, name), *name))
        .filter(|(distance, _)| *distance <= most)
        .min()
        .map(|(_, name)| name)
}

/// How many one-letter insertions, deletions or substitutions turn `a`
/// into `b` (Levenshtein).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelt_name_is_matched_to_the_closest_known_one() {
        assert_eq!(edits("transfr", "transfer"), 1);
        assert_eq!(edits("", "abc"), 3);
        assert_eq!(edits("kitten", "sitting"), 3);
        let names = ["transfer", "send_email", "get_balance"];
        assert_eq!(closest("transfr", &names), Some("transfer"));
        assert_eq!(closest("sendemail", &names), Some("send_email"));
        assert_eq!(closest("refund", &names), None);
    }
}
