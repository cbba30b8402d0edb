//! Where an attribute stands: inside an `impl` or `trait` block, or not.
//!
//! A macro sees only its item, and the items a tool expands to (a type,
//! an anonymous const) are refused inside an `impl` or `trait` with
//! errors about code the user never wrote. So the macro reads the source
//! file up to the attribute's line and finds the block it stands in,
//! which lets it say first, and only, what to do. Anything uncertain (no
//! file, a line past its end) answers `None`, and the expansion goes on
//! as if at module level. Only the innermost open brace counts, and only
//! when the text before it opens an `impl` or a trait, where a tool never
//! compiles; the lexer's cases (strings, raw strings, comments, character
//! literals beside lifetimes) are in the tests below.

/// A block a tool function cannot stand in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Block {
    Impl,
    Trait,
}

impl Block {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Block::Impl => "an `impl` block",
            Block::Trait => "a trait",
        }
    }
}

/// The block the macro invocation at `span` stands in directly, when it is
/// an `impl` or a `trait`. The file is read anew each time: a macro server
/// that outlives one build (an editor's) must never judge by an old copy.
pub(crate) fn enclosing_block(span: proc_macro::Span) -> Option<Block> {
    let source = std::fs::read_to_string(span.local_file()?).ok()?;
    let offset = line_start(&source, span.line())?;
    innermost(&source[..offset])
}

/// The byte offset where 1-based line `line` starts.
fn line_start(source: &str, line: usize) -> Option<usize> {
    if line <= 1 {
        return Some(0);
    }
    source
        .match_indices('\n')
        .nth(line - 2)
        .map(|(at, _)| at + 1)
}

/// The innermost block still open at the end of `code`, when it is an
/// `impl` or a `trait`. Skips comments, strings and character literals, so
/// that only real braces count.
fn innermost(code: &str) -> Option<Block> {
    let bytes = code.as_bytes();
    // The text before each open brace: what the block is.
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut head = 0;
    let mut i = 0;
    while i < bytes.len() {
        i = match bytes[i] {
            b'/' if bytes.get(i + 1) == Some(&b'/') => line_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => block_comment_end(bytes, i),
            b'"' => string_end(bytes, i + 1, 0),
            b'r' if starts_raw_string(bytes, i) => raw_string_end(bytes, i + 1),
            b'\'' => char_end(code, i),
            b'{' => {
                open.push((head, i));
                head = i + 1;
                i + 1
            }
            b'}' => {
                open.pop();
                head = i + 1;
                i + 1
            }
            b';' => {
                head = i + 1;
                i + 1
            }
            _ => i + 1,
        };
    }
    let &(start, end) = open.last()?;
    classify(&code[start..end])
}

/// What the text before a brace opens: `impl` or `trait` (after any
/// attributes and qualifiers), or something else.
fn classify(head: &str) -> Option<Block> {
    let mut words = strip_attributes(head)
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .skip_while(|w| {
            matches!(
                *w,
                "pub" | "crate" | "super" | "in" | "self" | "unsafe" | "auto" | "default"
            )
        });
    match words.next()? {
        "impl" => Some(Block::Impl),
        "trait" => Some(Block::Trait),
        _ => None,
    }
}

/// `head` without the `#[..]` attributes before it.
fn strip_attributes(head: &str) -> &str {
    let mut rest = head.trim_start();
    while let Some(after) = rest.strip_prefix('#') {
        let after = after
            .trim_start()
            .strip_prefix('!')
            .unwrap_or(after)
            .trim_start();
        let Some(inner) = after.strip_prefix('[') else {
            return rest;
        };
        let mut depth = 1;
        let mut end = inner.len();
        for (at, c) in inner.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = at + 1;
                break;
            }
        }
        rest = inner[end..].trim_start();
    }
    rest
}

fn line_end(bytes: &[u8], from: usize) -> usize {
    bytes[from..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |at| from + at + 1)
}

/// Past a `/* .. */` comment, nested ones included.
fn block_comment_end(bytes: &[u8], from: usize) -> usize {
    let mut depth = 0;
    let mut i = from;
    while i + 1 < bytes.len() {
        match (bytes[i], bytes[i + 1]) {
            (b'/', b'*') => {
                depth += 1;
                i += 2;
            }
            (b'*', b'/') => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Past the closing quote of a string whose text starts at `from`, closed
/// by `"` and `hashes` `#`s; escapes count only without hashes.
fn string_end(bytes: &[u8], from: usize, hashes: usize) -> usize {
    let mut i = from;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if hashes == 0 => i += 2,
            b'"' if bytes[i + 1..]
                .iter()
                .take(hashes)
                .filter(|&&b| b == b'#')
                .count()
                == hashes =>
            {
                return i + 1 + hashes;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

/// Whether a raw string (`r"`, `r#"`, also after `b` or `c`) starts at `at`.
fn starts_raw_string(bytes: &[u8], at: usize) -> bool {
    let before = at.checked_sub(1).map(|b| bytes[b]);
    let starts_word = match before {
        Some(b'b' | b'c') => at < 2 || !is_ident_byte(bytes[at - 2]),
        Some(b) => !is_ident_byte(b),
        None => true,
    };
    let hashes = bytes[at + 1..].iter().take_while(|&&b| b == b'#').count();
    starts_word && bytes.get(at + 1 + hashes) == Some(&b'"')
}

fn raw_string_end(bytes: &[u8], from: usize) -> usize {
    let hashes = bytes[from..].iter().take_while(|&&b| b == b'#').count();
    string_end(bytes, from + hashes + 1, hashes)
}

fn is_ident_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b >= 0x80
}

/// Past a character literal (`'x'`, `'\n'`, `'\u{1F600}'`) at `at`, or
/// past the quote of a lifetime (`'a`).
fn char_end(code: &str, at: usize) -> usize {
    let rest = &code[at + 1..];
    if let Some(escaped) = rest.strip_prefix('\\') {
        return escaped
            .find('\'')
            .map_or(code.len(), |close| at + 1 + 1 + close + 1);
    }
    let mut chars = rest.chars();
    match (chars.next(), chars.next()) {
        (Some(c), Some('\'')) => at + 1 + c.len_utf8() + 1,
        _ => at + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::{Block, innermost};

    #[test]
    fn the_block_an_attribute_stands_in() {
        let cases: &[(&str, Option<Block>)] = &[
            ("use x;\n", None),
            ("struct B;\nimpl B {\n    ", Some(Block::Impl)),
            (
                "impl<T: Clone> Tr for B<T> where T: Send {\n",
                Some(Block::Impl),
            ),
            ("#[cfg(test)]\nunsafe impl B {\n", Some(Block::Impl)),
            ("pub(crate) trait T {\n", Some(Block::Trait)),
            ("impl B {\n fn f() {}\n}\n", None),
            ("mod m {\n", None),
            ("impl B {\n fn f() {\n", None),
            ("impl B {\n const X: &str = \"}\";\n", Some(Block::Impl)),
            ("impl B {\n // }\n /* } /* } */ } */\n", Some(Block::Impl)),
            ("impl B {\n const C: char = '}';\n", Some(Block::Impl)),
            ("impl B {\n fn f<'a>(x: &'a str) {}\n", Some(Block::Impl)),
            ("impl B {\n const S: &str = r#\"}\"#;\n", Some(Block::Impl)),
            ("impl B {\n const S: &[u8] = br\"}\";\n", Some(Block::Impl)),
            ("impl B {\n const S: &str = \"\\\"}\";\n", Some(Block::Impl)),
            ("fn main() {\n impl B {}\n", None),
            ("let implement = 1; {\n", None),
        ];
        for (code, expected) in cases {
            assert_eq!(innermost(code), *expected, "{code:?}");
        }
    }
}
