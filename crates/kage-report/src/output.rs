//! Where a report goes: the `output=` option's template, which the runtime expands when it
//! writes a report and `kage run` when it looks for one, so both read it one way.

/// The `output=` option's default.
pub const DEFAULT_OUTPUT: &str = "kage.%e.%p.json";

/// Expands an `output=` template: `%e` the executable's name, `%p` the pid, `%%` a percent
/// sign (any other `%` stays as it is). A forked child (`forked`) whose template has no
/// `%p` gets `.<pid>` before `.json` (or at the end), so it does not overwrite its
/// parent's report.
pub fn expand_output(template: &str, exe: &str, pid: u32, forked: bool) -> String {
    let mut out = String::new();
    let mut has_pid = false;
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('e') => out += exe,
            Some('p') => {
                has_pid = true;
                out += &pid.to_string();
            }
            Some('%') => out.push('%'),
            Some(o) => {
                out.push('%');
                out.push(o);
            }
            None => out.push('%'),
        }
    }
    if forked && !has_pid {
        match out.strip_suffix(".json") {
            Some(stem) => out = format!("{stem}.{pid}.json"),
            None => out = format!("{out}.{pid}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_templates() {
        assert_eq!(
            expand_output(DEFAULT_OUTPUT, "prog", 42, false),
            "kage.prog.42.json"
        );
        assert_eq!(
            expand_output(DEFAULT_OUTPUT, "prog", 43, true),
            "kage.prog.43.json"
        );
        assert_eq!(expand_output("/t/r.json", "p", 7, false), "/t/r.json");
        assert_eq!(expand_output("/t/r.json", "p", 7, true), "/t/r.7.json");
        assert_eq!(expand_output("/t/out", "p", 7, true), "/t/out.7");
        assert_eq!(expand_output("a%%b%x%", "p", 7, false), "a%b%x%");
        assert_eq!(
            expand_output("out/%e-%p-100%%.json", "prog", 7, false),
            "out/prog-7-100%.json"
        );
    }
}
