//! Runtime options: one declared table, read from `KAGE_OPTIONS` (`key=value` items
//! separated by `:` or `,`), in the style of the sanitizers' flags.

use std::collections::BTreeMap;

/// The options in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub tool: String,
    pub output: String,
    pub enabled: bool,
    pub handle_signals: bool,
    pub verbosity: u32,
    pub help: bool,
}

/// One declared option: its name, default, help text, and how it is parsed and shown.
pub struct OptionDef {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    set: fn(&mut Options, &str) -> Result<(), String>,
    get: fn(&Options) -> String,
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => Err("expected 0 or 1".into()),
    }
}

fn parse_u32(v: &str) -> Result<u32, String> {
    v.parse()
        .map_err(|_| "expected a non-negative integer".into())
}

/// Every option the runtime knows. `help=1` prints this table.
pub static OPTIONS: &[OptionDef] = &[
    OptionDef {
        name: "tool",
        default: "count",
        help: "analysis tool to run (see the tool list printed with help=1)",
        set: |o, v| {
            if v.is_empty() {
                return Err("expected a tool name".into());
            }
            o.tool = v.to_string();
            Ok(())
        },
        get: |o| o.tool.clone(),
    },
    OptionDef {
        name: "output",
        default: "kage.%e.%p.json",
        help: "report path; %e = executable name, %p = pid (a forked child without %p \
               inserts .<pid> before .json)",
        set: |o, v| {
            if v.is_empty() {
                return Err("expected a path".into());
            }
            o.output = v.to_string();
            Ok(())
        },
        get: |o| o.output.clone(),
    },
    OptionDef {
        name: "enabled",
        default: "1",
        help: "1: deliver memory accesses to the tool from the start; 0: start off \
               (the program turns it on with kage_set_enabled(1))",
        set: |o, v| parse_bool(v).map(|b| o.enabled = b),
        get: |o| (o.enabled as u8).to_string(),
    },
    OptionDef {
        name: "handle_signals",
        default: "1",
        help: "1: write a (best effort) report on fatal signals whose handler is the default one",
        set: |o, v| parse_bool(v).map(|b| o.handle_signals = b),
        get: |o| (o.handle_signals as u8).to_string(),
    },
    OptionDef {
        name: "verbosity",
        default: "0",
        help: "0: quiet; 1: print the report path; 2: also print module registrations",
        set: |o, v| parse_u32(v).map(|n| o.verbosity = n),
        get: |o| o.verbosity.to_string(),
    },
    OptionDef {
        name: "help",
        default: "0",
        help: "1: print every option with its default and help to stderr, then run",
        set: |o, v| parse_bool(v).map(|b| o.help = b),
        get: |o| (o.help as u8).to_string(),
    },
];

impl Default for Options {
    fn default() -> Self {
        let mut o = Options {
            tool: String::new(),
            output: String::new(),
            enabled: true,
            handle_signals: true,
            verbosity: 0,
            help: false,
        };
        for d in OPTIONS {
            // The declared defaults are valid by construction (tested below).
            let _ = (d.set)(&mut o, d.default);
        }
        o
    }
}

impl Options {
    /// Parses a `KAGE_OPTIONS` string. Returns the options and one warning per problem
    /// (unknown option, bad value, item without `=`); a bad item keeps the default.
    pub fn parse(s: &str) -> (Options, Vec<String>) {
        let mut o = Options::default();
        let mut warnings = Vec::new();
        for item in s.split([':', ',']) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let Some((k, v)) = item.split_once('=') else {
                warnings.push(format!("KAGE_OPTIONS: '{item}' is not key=value; ignored"));
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            match OPTIONS.iter().find(|d| d.name == k) {
                None => warnings.push(format!(
                    "KAGE_OPTIONS: unknown option '{k}' ignored; known options: {}",
                    OPTIONS
                        .iter()
                        .map(|d| d.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Some(d) => {
                    if let Err(e) = (d.set)(&mut o, v) {
                        warnings.push(format!(
                            "KAGE_OPTIONS: bad value '{v}' for option '{k}' ({e}); using the default '{}'",
                            d.default
                        ));
                    }
                }
            }
        }
        (o, warnings)
    }

    /// Every option with the value in force, for the report.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        OPTIONS
            .iter()
            .map(|d| (d.name.to_string(), (d.get)(self)))
            .collect()
    }

    /// The `help=1` text: every option with its default and help, then the tools.
    pub fn help_text() -> String {
        let mut s = String::from("kage: runtime options (KAGE_OPTIONS=key=value:key=value...)\n");
        for d in OPTIONS {
            s += &format!("  {:<15} default: {:<17} {}\n", d.name, d.default, d.help);
        }
        s += "kage: tools (tool=...)\n";
        for t in crate::tools::TOOLS {
            s += &format!("  {:<15} {}\n", t.name, t.help);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let o = Options::default();
        assert_eq!(o.tool, "count");
        assert_eq!(o.output, "kage.%e.%p.json");
        assert!(o.enabled && o.handle_signals && !o.help);
        assert_eq!(o.verbosity, 0);
        for d in OPTIONS {
            let mut x = Options::default();
            assert!(
                (d.set)(&mut x, d.default).is_ok(),
                "default of {} parses",
                d.name
            );
        }
    }

    #[test]
    fn parse_both_separators() {
        let (o, w) = Options::parse("tool=count:output=/tmp/x.json,enabled=0 : verbosity=2");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.output, "/tmp/x.json");
        assert!(!o.enabled);
        assert_eq!(o.verbosity, 2);
        assert_eq!(Options::parse("").0, Options::default());
    }

    #[test]
    fn unknown_and_bad_values_warn_and_keep_defaults() {
        let (o, w) = Options::parse("bogus=3:enabled=yes:verbosity=-1:novalue:help=1");
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("unknown option 'bogus'") && w[0].contains("handle_signals"));
        assert!(w[1].contains("'yes'") && w[1].contains("enabled"));
        assert!(w[2].contains("verbosity"));
        assert!(w[3].contains("novalue"));
        assert!(o.enabled);
        assert_eq!(o.verbosity, 0);
        assert!(o.help);
    }

    #[test]
    fn map_has_every_option() {
        let (o, _) = Options::parse("enabled=0");
        let m = o.to_map();
        assert_eq!(m.len(), OPTIONS.len());
        assert_eq!(m["enabled"], "0");
        assert_eq!(m["tool"], "count");
        let h = Options::help_text();
        for d in OPTIONS {
            assert!(h.contains(d.name) && h.contains(d.help));
        }
        assert!(h.contains("count"));
    }
}
