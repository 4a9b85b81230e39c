//! Runtime options, read from `KAGE_OPTIONS` (`key=value` items separated by `:` or `,`), in
//! the style of the sanitizers' flags.
//!
//! Options are data: an [`OptionDef`] is a name, a default, a help text and a parser. This
//! module declares the common ones ([`COMMON`], and [`HELP`], listed last); each tool
//! declares its own in its module (`ToolInfo::options`), and [`Options::parse`] takes those
//! tables as an argument, so this module knows no tool. Every value is kept as its parser
//! gives it back (as the report shows it); the typed reading of a tool's options is the
//! tool's own.

use std::collections::BTreeMap;

/// One declared option.
pub struct OptionDef {
    pub name: &'static str,
    pub default: &'static str,
    pub help: &'static str,
    /// Checks a value and gives it back as the report shows it (a number in its plain
    /// form); `Err` says what was expected.
    pub parse: fn(&str) -> Result<String, String>,
}

impl std::fmt::Debug for OptionDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "OptionDef({})", self.name)
    }
}

/// `0` or `1`.
pub fn parse_bool(v: &str) -> Result<String, String> {
    match v {
        "0" | "1" => Ok(v.to_string()),
        _ => Err("expected 0 or 1".into()),
    }
}

fn parse_u32(v: &str) -> Result<String, String> {
    v.parse::<u32>()
        .map(|n| n.to_string())
        .map_err(|_| "expected a non-negative integer".into())
}

/// Anything but the empty string; `Err(what)` otherwise.
pub fn non_empty(v: &str, what: &str) -> Result<String, String> {
    if v.is_empty() {
        Err(format!("expected {what}"))
    } else {
        Ok(v.to_string())
    }
}

pub const TOOL: OptionDef = OptionDef {
    name: "tool",
    default: "count",
    help: "analysis tool to run (see the tool list printed with help=1); programs built \
           with KAGE_TOOL=working-set default to working-set",
    parse: |v| non_empty(v, "a tool name"),
};

pub const OUTPUT: OptionDef = OptionDef {
    name: "output",
    default: kage_report::DEFAULT_OUTPUT,
    help: "report path, relative to the directory the program started in; %e = \
           executable name, %p = pid (a forked child without %p inserts .<pid> before .json)",
    parse: |v| non_empty(v, "a path"),
};

pub const ENABLED: OptionDef = OptionDef {
    name: "enabled",
    default: "1",
    help: "1: deliver memory accesses to the tool from the start; 0: start off \
           (the program turns it on with kage_set_enabled(1))",
    parse: parse_bool,
};

pub const HANDLE_SIGNALS: OptionDef = OptionDef {
    name: "handle_signals",
    default: "1",
    help: "1: write a (best effort) report on fatal signals whose handler is the default one",
    parse: parse_bool,
};

pub const VERBOSITY: OptionDef = OptionDef {
    name: "verbosity",
    default: "0",
    help: "0: quiet; 1: print the report path; 2: also print module registrations",
    parse: parse_u32,
};

/// Shared by the working-set and footprint tools, and tied to the build (`kage_abi`).
pub const LINE_SIZE: OptionDef = OptionDef {
    name: "line_size",
    default: "64",
    help: "working-set, footprint: cache line size in bytes (a power of two from 16 to 4096); \
           a program built for the working-set tool defaults to, and needs at least, the \
           line size it was built with (KAGE_WS_LINE_SIZE)",
    parse: |v| match v.parse::<u64>() {
        Ok(n) if kage_abi::is_line_size(n) => Ok(n.to_string()),
        _ => Err("expected a power of two from 16 to 4096".into()),
    },
};

pub const REPORT_LOG: OptionDef = OptionDef {
    name: "report_log",
    default: "",
    help: "a file to which the absolute path of the report is appended, one line per report \
           (kage run sets it to list the reports of every process the program started)",
    parse: |v| Ok(v.to_string()),
};

pub const HELP: OptionDef = OptionDef {
    name: "help",
    default: "0",
    help: "1: print every option with its default and help to stderr, then run",
    parse: parse_bool,
};

/// The options of every tool, before the tools' own; [`HELP`] comes after those.
pub static COMMON: &[OptionDef] = &[
    TOOL,
    OUTPUT,
    REPORT_LOG,
    ENABLED,
    HANDLE_SIGNALS,
    VERBOSITY,
    LINE_SIZE,
];

/// The options in force: every known option with its value (parsed; the default unless
/// set), in the order [`Options::parse`] lists them.
#[derive(Clone)]
pub struct Options {
    values: Vec<(&'static OptionDef, String)>,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.values.iter().map(|(d, v)| (d.name, v)))
            .finish()
    }
}

impl PartialEq for Options {
    fn eq(&self, other: &Options) -> bool {
        self.values.len() == other.values.len()
            && (self.values.iter().zip(&other.values))
                .all(|((a, x), (b, y))| a.name == b.name && x == y)
    }
}

impl Eq for Options {}

impl Default for Options {
    /// The common options' defaults (no tool's options).
    fn default() -> Self {
        Options::parse("", &[]).0
    }
}

impl Options {
    /// Parses a `KAGE_OPTIONS` string against the common options and `tools`' tables (each
    /// tool's [`OptionDef`]s). Returns the options and one warning per problem (unknown
    /// option, bad value, item without `=`); a bad item keeps the default. A name declared
    /// twice is the first declaration's.
    pub fn parse(s: &str, tools: &[&'static [OptionDef]]) -> (Options, Vec<String>) {
        let mut values: Vec<(&'static OptionDef, String)> = Vec::new();
        let all = COMMON
            .iter()
            .chain(tools.iter().flat_map(|t| t.iter()))
            .chain([&HELP]);
        for d in all {
            if values.iter().all(|(known, _)| known.name != d.name) {
                values.push((d, d.default.to_string()));
            }
        }
        let mut o = Options { values };
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
            match o.values.iter().position(|(d, _)| d.name == k) {
                None => warnings.push(format!(
                    "KAGE_OPTIONS: unknown option '{k}' ignored; known options: {}",
                    o.values
                        .iter()
                        .map(|(d, _)| d.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )),
                Some(i) => {
                    let d = o.values[i].0;
                    match (d.parse)(v) {
                        Ok(value) => o.values[i].1 = value,
                        Err(e) => warnings.push(format!(
                            "KAGE_OPTIONS: bad value '{v}' for option '{k}' ({e}); using the default '{}'",
                            d.default
                        )),
                    }
                }
            }
        }
        (o, warnings)
    }

    /// The value in force of option `d` (a tool's, or a common one): as written when set
    /// and valid, else its default (also when `d` was not among the parsed tables).
    pub fn get(&self, d: &OptionDef) -> &str {
        self.values
            .iter()
            .find(|(known, _)| known.name == d.name)
            .map_or(d.default, |(_, v)| v.as_str())
    }

    /// Whether option `d` is 1 (for `0`/`1` options).
    pub fn flag(&self, d: &OptionDef) -> bool {
        self.get(d) == "1"
    }

    /// Sets an option the runtime or a tool corrects (the report shows the value in
    /// force). `Err` for an unknown option or a value its parser refuses.
    pub fn set(&mut self, d: &OptionDef, value: &str) -> Result<(), String> {
        let Some(slot) = self
            .values
            .iter_mut()
            .find(|(known, _)| known.name == d.name)
        else {
            return Err(format!("unknown option '{}'", d.name));
        };
        slot.1 = (slot.0.parse)(value)?;
        Ok(())
    }

    pub fn tool(&self) -> &str {
        self.get(&TOOL)
    }

    pub fn output(&self) -> &str {
        self.get(&OUTPUT)
    }

    pub fn enabled(&self) -> bool {
        self.flag(&ENABLED)
    }

    pub fn handle_signals(&self) -> bool {
        self.flag(&HANDLE_SIGNALS)
    }

    pub fn verbosity(&self) -> u32 {
        self.get(&VERBOSITY).parse().unwrap_or(0)
    }

    pub fn help(&self) -> bool {
        self.flag(&HELP)
    }

    /// Bytes per cache line: a power of two, 16..=4096.
    pub fn line_size(&self) -> u64 {
        self.get(&LINE_SIZE)
            .parse()
            .unwrap_or(kage_abi::DEFAULT_LINE_SIZE)
    }

    /// Whether the `KAGE_OPTIONS` string `s` sets option `name` (to anything).
    pub fn is_set(s: &str, name: &str) -> bool {
        s.split([':', ','])
            .filter_map(|item| item.split_once('='))
            .any(|(k, _)| k.trim() == name)
    }

    /// Every option with the value in force, for the report.
    pub fn to_map(&self) -> BTreeMap<String, String> {
        (self.values.iter())
            .map(|(d, v)| (d.name.to_string(), v.clone()))
            .collect()
    }

    /// The `help=1` text: every option with its default and help, then `tools` (name,
    /// help).
    pub fn help_text<'a>(&self, tools: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
        let mut s = String::from("kage: runtime options (KAGE_OPTIONS=key=value:key=value...)\n");
        // The names' column fits the longest name, so that the defaults line up.
        let width = (self.values.iter())
            .map(|(d, _)| d.name.len())
            .max()
            .unwrap_or(0)
            .max(15);
        for (d, _) in &self.values {
            s += &format!(
                "  {:<width$} default: {:<17} {}\n",
                d.name, d.default, d.help
            );
        }
        s += "kage: tools (tool=...)\n";
        for (name, help) in tools {
            s += &format!("  {name:<width$} {help}\n");
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
        assert_eq!(o.tool(), "count");
        assert_eq!(o.output(), "kage.%e.%p.json");
        assert!(o.enabled() && o.handle_signals() && !o.help());
        assert_eq!(o.verbosity(), 0);
        assert_eq!(o.line_size(), kage_abi::DEFAULT_LINE_SIZE);
        assert_eq!(LINE_SIZE.default, kage_abi::DEFAULT_LINE_SIZE.to_string());
        for d in COMMON.iter().chain([&HELP]) {
            assert_eq!((d.parse)(d.default).as_deref(), Ok(d.default), "{}", d.name);
        }
    }

    #[test]
    fn parse_both_separators() {
        let (o, w) = Options::parse("tool=count:output=/tmp/x.json,enabled=0 : verbosity=2", &[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.output(), "/tmp/x.json");
        assert!(!o.enabled());
        assert_eq!(o.verbosity(), 2);
        assert_eq!(Options::parse("", &[]).0, Options::default());
        // Numbers as the report shows them.
        let (o, w) = Options::parse("verbosity=02:line_size=0128", &[]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(
            (o.to_map()["verbosity"].as_str(), o.line_size()),
            ("2", 128)
        );
        assert_eq!(o.to_map()["line_size"], "128");
    }

    #[test]
    fn unknown_and_bad_values_warn_and_keep_defaults() {
        let (o, w) = Options::parse("bogus=3:enabled=yes:verbosity=-1:novalue:help=1", &[]);
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("unknown option 'bogus'") && w[0].contains("handle_signals"));
        assert!(w[1].contains("'yes'") && w[1].contains("enabled"));
        assert!(w[2].contains("verbosity"));
        assert!(w[3].contains("novalue"));
        assert!(o.enabled());
        assert_eq!(o.verbosity(), 0);
        assert!(o.help());
        let (o, w) = Options::parse("line_size=48:line_size=4096", &[]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(o.line_size(), 4096);
    }

    static TOOL_A: &[OptionDef] = &[OptionDef {
        name: "depth",
        default: "3",
        help: "a: how deep",
        parse: parse_u32,
    }];
    static TOOL_B: &[OptionDef] = &[
        OptionDef {
            name: "mode",
            default: "fast",
            help: "b: how",
            parse: |v| non_empty(v, "a mode"),
        },
        // Declared by tool a already: a's declaration counts.
        OptionDef {
            name: "depth",
            default: "9",
            help: "b: ignored",
            parse: parse_bool,
        },
    ];

    #[test]
    fn tools_options_between_the_common_ones_and_help() {
        let (mut o, w) = Options::parse("depth=5:mode=slow", &[TOOL_A, TOOL_B]);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((o.get(&TOOL_A[0]), o.get(&TOOL_B[0])), ("5", "slow"));
        let names: Vec<_> = o.to_map().into_keys().collect();
        assert_eq!(names.len(), COMMON.len() + 3);
        let (_, w) = Options::parse("nope=1", &[TOOL_A, TOOL_B]);
        assert!(w[0].ends_with(
            "known options: tool, output, report_log, enabled, handle_signals, verbosity, line_size, \
             depth, mode, help"
        ));
        // Options a tool corrects show in the map; a bad or unknown one is refused.
        assert!(o.set(&TOOL_A[0], "7").is_ok());
        assert_eq!(o.to_map()["depth"], "7");
        assert!(o.set(&TOOL_A[0], "x").is_err());
        assert!(o.set(&TOOL_B[1], "1").is_ok(), "a's depth");
        assert_eq!(o.get(&TOOL_A[0]), "1");
        // Without a tool's table: its defaults, and its options are unknown.
        let (o, w) = Options::parse("depth=5", &[]);
        assert_eq!(w.len(), 1);
        assert_eq!(o.get(&TOOL_A[0]), "3");
    }

    #[test]
    fn map_and_help_have_every_option() {
        let (o, _) = Options::parse("enabled=0", &[TOOL_A]);
        let m = o.to_map();
        assert_eq!(m.len(), COMMON.len() + 2);
        assert_eq!(m["enabled"], "0");
        assert_eq!(m["tool"], "count");
        assert_eq!(m["depth"], "3");
        let h = o.help_text([("count", "counts"), ("other", "does more")]);
        for d in COMMON.iter().chain([&HELP, &TOOL_A[0]]) {
            assert!(h.contains(d.name) && h.contains(d.help));
        }
        assert!(h.contains("  count           counts\n"));
    }
}
