//! Words for the copy-paste commands the pages show. A host name comes from
//! the agent (`--name`), so it may hold quotes, spaces, `$(…)` or a newline:
//! pasted into a shell, it must stay one inert word.

/// `word` quoted for a POSIX shell: left bare when it holds only characters
/// no shell treats specially, else in single quotes (inside which nothing is
/// special), each `'` written as `'\''`.
pub fn quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.,:/=@+%".contains(&b));
    if plain {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `sh` makes of `printf %s <quoted>`: the word as one argument, run by a real shell.
    fn through_sh(quoted: &str) -> String {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("printf '%s|' {quoted}"))
            .output()
            .expect("running sh");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    #[test]
    fn plain_names_stay_bare_and_the_rest_is_single_quoted() {
        let cases = [
            ("host=db-01.example", "host=db-01.example"),
            ("host=it's", r"'host=it'\''s'"),
            ("host=a b", "'host=a b'"),
            ("", "''"),
            ("host=$(id)", "'host=$(id)'"),
        ];
        for (word, want) in cases {
            assert_eq!(quote(word), want, "{word:?}");
        }
    }

    #[test]
    fn hostile_names_reach_the_command_as_one_inert_word() {
        let marker = std::env::temp_dir().join(format!("cipherfleet-quote-{}", std::process::id()));
        let touch = marker.display();
        let hostile = [
            format!("host=$(touch {touch})"),
            format!("host=`touch {touch}`"),
            format!("host=x'; touch {touch}; echo '"),
            format!("host=a\"b\" ; touch {touch} #"),
            "host=tab\there\nnewline $HOME \\ * ?".to_string(),
            "host=''''".to_string(),
        ];
        for word in &hostile {
            assert_eq!(through_sh(&quote(word)), format!("{word}|"), "{word:?}");
        }
        assert!(!marker.exists(), "a quoted name ran a command");
    }
}
