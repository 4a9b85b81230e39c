//! Building the report from the registry and the tool's results, and writing it atomically.

use crate::collections::FastMap;
use crate::registry::RegionInfo;
use crate::tool::{RegionFields, RegionMembers, ToolResults};
use kage_report::{ProgramEnd, Region, ReportOf, FORMAT_NAME, FORMAT_VERSION};
use serde::Serialize;
use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

/// Everything a report is made of.
pub struct ReportInput<'a> {
    pub tool: &'a str,
    pub program: String,
    pub args: Vec<String>,
    pub pid: u32,
    pub forked_from: Option<u32>,
    pub end: ProgramEnd,
    pub complete: bool,
    pub unclosed_threads: Option<kage_report::UnclosedThreads>,
    pub threads: u32,
    pub options: BTreeMap<String, String>,
    pub regions: &'a [RegionInfo],
    pub results: ToolResults,
}

/// The report as the runtime writes it: its regions' entries made one at a time as they
/// are serialised.
pub type RuntimeReport<'a> = ReportOf<RegionEntries<'a>>;

/// The registered regions with the tool's fields, serialised as a sequence of [`Region`]s.
pub struct RegionEntries<'a> {
    regions: &'a [RegionInfo],
    fields: RegionFields,
}

/// What comes before a region's member's value: a comma (but for the first), a line break,
/// the indentation and the member's name, one literal (one copy into the writer's buffer).
macro_rules! member {
    (first $name:literal) => {
        concat!("\n      \"", $name, "\": ").as_bytes()
    };
    ($name:literal) => {
        concat!(",\n      \"", $name, "\": ").as_bytes()
    };
}

impl RegionEntries<'_> {
    /// The entry of region `id`.
    pub fn entry(&self, id: usize) -> Region {
        let r = &self.regions[id];
        Region {
            id: id as u32,
            kind: r.kind,
            name: r.name.to_string(),
            symbol: r.symbol.to_string(),
            file: r.file.to_string(),
            line: r.line,
            end_line: r.end_line,
            parent: r.parent,
            inlined_at: r.inlined_at.as_ref().map(|at| kage_report::CallSite {
                file: at.file.to_string(),
                line: at.line,
                column: at.column,
            }),
            metrics: (self.fields)(id).into_map(),
        }
    }
}

impl RegionEntries<'_> {
    /// The regions, as the value of the report's top-level `regions` member in the pretty
    /// format (entries two levels deep), written straight to `out`: what serde_json writes
    /// for the [`Region`]s of [`entry`](Self::entry) (tested), at a fraction of the cost. A
    /// big program's report is mostly its regions (SQLite's 18,500 entries of twenty
    /// members, 12 MB), and serde_json escaped every member's name byte by byte: most of
    /// the time the program took to exit. Names, symbols and files are escaped once each
    /// (the registry interns them), numbers formatted by `itoa`.
    fn write_pretty<W: io::Write>(&self, out: &mut W) -> io::Result<()> {
        if self.regions.is_empty() {
            return out.write_all(b"[]");
        }
        let mut strings = EscapedStrings::default();
        let mut number = itoa::Buffer::new();
        for (id, r) in self.regions.iter().enumerate() {
            out.write_all(if id == 0 { b"[\n    {" } else { b",\n    {" })?;
            out.write_all(member!(first "id"))?;
            out.write_all(number.format(id as u32).as_bytes())?;
            out.write_all(member!("kind"))?;
            out.write_all(strings.kind(r.kind)?)?;
            out.write_all(member!("name"))?;
            out.write_all(strings.get(&r.name)?)?;
            out.write_all(member!("symbol"))?;
            out.write_all(strings.get(&r.symbol)?)?;
            out.write_all(member!("file"))?;
            out.write_all(strings.get(&r.file)?)?;
            out.write_all(member!("line"))?;
            out.write_all(number.format(r.line).as_bytes())?;
            out.write_all(member!("end_line"))?;
            out.write_all(number.format(r.end_line).as_bytes())?;
            out.write_all(member!("parent"))?;
            match r.parent {
                Some(parent) => out.write_all(number.format(parent).as_bytes())?,
                None => out.write_all(b"null")?,
            }
            if let Some(at) = &r.inlined_at {
                out.write_all(member!("inlined_at"))?;
                out.write_all(b"{\n        \"file\": ")?;
                out.write_all(strings.get(&at.file)?)?;
                out.write_all(b",\n        \"line\": ")?;
                out.write_all(number.format(at.line).as_bytes())?;
                out.write_all(b",\n        \"column\": ")?;
                out.write_all(number.format(at.column).as_bytes())?;
                out.write_all(b"\n      }")?;
            }
            match (self.fields)(id) {
                RegionMembers::Count(c) => {
                    let (i, e) = (&c.inclusive, &c.exclusive);
                    // In their names' order, as a JSON map holds them.
                    for (name, value) in [
                        (member!("bytes_read"), i.bytes_read),
                        (member!("bytes_written"), i.bytes_written),
                        (member!("instances"), c.instances),
                        (member!("loads"), i.loads),
                        (member!("self_bytes_read"), e.bytes_read),
                        (member!("self_bytes_written"), e.bytes_written),
                        (member!("self_loads"), e.loads),
                        (member!("self_stores"), e.stores),
                        (member!("stores"), i.stores),
                    ] {
                        out.write_all(name)?;
                        out.write_all(number.format(value).as_bytes())?;
                    }
                }
                RegionMembers::Map(members) => {
                    for (name, value) in &members {
                        out.write_all(b",\n      ")?;
                        serde_json::to_writer(&mut *out, name)?;
                        out.write_all(b": ")?;
                        let indented = Pretty {
                            depth: 3,
                            has_value: false,
                        };
                        let mut json = serde_json::Serializer::with_formatter(&mut *out, indented);
                        value.serialize(&mut json).map_err(io::Error::other)?;
                    }
                }
            }
            out.write_all(b"\n    }")?;
        }
        out.write_all(b"\n  ]")
    }
}

/// Strings as JSON (quoted and escaped), each made once: the registry's interned strings
/// by address, the region kinds by kind.
#[derive(Default)]
struct EscapedStrings {
    by_address: FastMap<(*const u8, usize), Box<[u8]>>,
    kinds: Vec<(kage_report::RegionKind, Box<[u8]>)>,
}

impl EscapedStrings {
    fn get(&mut self, s: &Arc<str>) -> io::Result<&[u8]> {
        use std::collections::hash_map::Entry;
        Ok(match self.by_address.entry((s.as_ptr(), s.len())) {
            Entry::Occupied(slot) => slot.into_mut(),
            Entry::Vacant(slot) => slot.insert(serde_json::to_vec(&**s)?.into()),
        })
    }

    fn kind(&mut self, kind: kage_report::RegionKind) -> io::Result<&[u8]> {
        let at = match self.kinds.iter().position(|(k, _)| *k == kind) {
            Some(at) => at,
            None => {
                self.kinds.push((kind, serde_json::to_vec(&kind)?.into()));
                self.kinds.len() - 1
            }
        };
        Ok(&self.kinds[at].1)
    }
}

pub fn build(i: ReportInput<'_>) -> RuntimeReport<'_> {
    let mut report = ReportOf {
        format: FORMAT_NAME.into(),
        version: FORMAT_VERSION,
        tool: i.tool.into(),
        program: i.program,
        args: i.args,
        pid: i.pid,
        forked_from: i.forked_from,
        end: i.end,
        complete: i.complete,
        unclosed_threads: i.unclosed_threads,
        threads: i.threads,
        options: i.options,
        regions: RegionEntries {
            regions: i.regions,
            fields: i.results.regions,
        },
        tool_data: i.results.top,
    };
    add_hcpa_plan(&mut report);
    report
}

/// An hcpa report carries its plan (docs/hcpa.md, "The planner"), made for this machine's
/// cores with the default thresholds as it is written (`kage report --cores` plans again).
/// The plan needs every region's statistics at once: made here, where the tool is done. The
/// planner reads the regions' shapes ([`kage_report::RegionShape`], borrowed from the
/// registry) and their statistics, each read from its region's metrics in turn: a big
/// program's entries (SQLite's 18,500 regions) are never all alive at once.
fn add_hcpa_plan(report: &mut RuntimeReport<'_>) {
    if report.tool != "hcpa" {
        return;
    }
    let entries = &report.regions;
    let stats = (0..entries.regions.len())
        .map(|id| kage_report::HcpaStats::of_metrics(id as u32, &(entries.fields)(id).into_map()))
        .collect::<Result<Vec<_>, _>>();
    // A malformed hcpa part is the tool's bug: the report goes out without a plan, and
    // `kage report` says what is wrong with it.
    let Ok(stats) = stats else { return };
    let Ok(hcpa) = kage_report::Hcpa::from_parts(&report.tool_data, stats) else {
        return;
    };
    let shapes: Vec<kage_report::RegionShape> = (entries.regions.iter().enumerate())
        .map(|(id, r)| {
            let names = (&*r.name, &*r.symbol, &*r.file);
            kage_report::RegionShape::new(id as u32, r.kind, r.parent, r.line, names)
        })
        .collect();
    let options = kage_report::PlanOptions::for_this_machine();
    let plan = kage_report::plan_shapes(&shapes, &hcpa, &options);
    report.tool_data.extend(plan.to_tool_data());
}

/// `path`, taken from `dir` when it is relative (and `dir` is known).
pub fn from_dir(path: &str, dir: Option<&std::path::Path>) -> String {
    match dir {
        Some(dir) if std::path::Path::new(path).is_relative() => {
            dir.join(path).to_string_lossy().into_owned()
        }
        _ => path.to_string(),
    }
}

/// Writes the report to a temporary file beside `path`, then renames it into place, so a
/// reader never sees a half-written report. The JSON is streamed through a small buffer:
/// a report with thousands of regions would otherwise take megabytes of the program's peak
/// memory as one string.
pub fn write(path: &str, report: &RuntimeReport<'_>, pid: u32) -> io::Result<()> {
    let stream = |file: std::fs::File| -> io::Result<()> {
        let mut out = io::BufWriter::with_capacity(64 << 10, file);
        write_json(&mut out, report)?;
        io::Write::flush(&mut out)
    };
    // A device or pipe (`output=/dev/null`, `/dev/stderr`, a FIFO) is written to, never
    // replaced: renaming over /dev/null would turn it into a file for the whole machine.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir()) {
        return std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(stream);
    }
    let tmp = format!("{path}.tmp.{pid}");
    std::fs::File::create(&tmp)
        .and_then(stream)
        .and_then(|()| std::fs::rename(&tmp, path))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
}

/// `report` as serde_json's pretty JSON of the report model (tested): serde_json writes the
/// report with an empty region list, and the regions are written in its place
/// ([`RegionEntries::write_pretty`]).
fn write_json<W: io::Write>(out: &mut W, report: &RuntimeReport<'_>) -> io::Result<()> {
    let frame = ReportOf {
        format: report.format.clone(),
        version: report.version,
        tool: report.tool.clone(),
        program: report.program.clone(),
        args: report.args.clone(),
        pid: report.pid,
        forked_from: report.forked_from,
        end: report.end,
        complete: report.complete,
        unclosed_threads: report.unclosed_threads,
        threads: report.threads,
        options: report.options.clone(),
        regions: [(); 0],
        tool_data: report.tool_data.clone(),
    };
    let mut text = Vec::new();
    let mut json = serde_json::Serializer::with_formatter(&mut text, Pretty::default());
    frame.serialize(&mut json).map_err(io::Error::other)?;
    // A member of the top-level object: a line break (which no string holds unescaped),
    // two spaces.
    const EMPTY_REGIONS: &[u8] = b"\n  \"regions\": []";
    let at = (text.windows(EMPTY_REGIONS.len()))
        .position(|w| w == EMPTY_REGIONS)
        .ok_or_else(|| io::Error::other("the report has no region list"))?;
    let value_at = at + EMPTY_REGIONS.len() - 2;
    out.write_all(&text[..value_at])?;
    report.regions.write_pretty(out)?;
    out.write_all(&text[value_at + 2..])
}

/// serde_json's pretty format (`to_writer_pretty`: two spaces a level), with each line
/// break and its indentation written at once: serde_json writes the indentation two
/// spaces at a time, which was a third of a big program's report time (SQLite's report
/// has 18,500 entries of a dozen members each).
#[derive(Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// A comma, a line break and the indentation of `(LINE.len() - 2) / 2` levels.
const LINE: [u8; 2 + 2 * 32] = {
    let mut line = [b' '; 2 + 2 * 32];
    line[0] = b',';
    line[1] = b'\n';
    line
};

impl Pretty {
    /// A line break (after a comma when `comma`) and the current indentation.
    fn line<W: ?Sized + io::Write>(&self, w: &mut W, comma: bool) -> io::Result<()> {
        let start = if comma { 0 } else { 1 };
        let spaces = 2 * self.depth;
        if 2 + spaces <= LINE.len() {
            return w.write_all(&LINE[start..2 + spaces]);
        }
        w.write_all(&LINE[start..2])?;
        (0..spaces).try_for_each(|_| w.write_all(b" "))
    }

    fn open<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    fn close<W: ?Sized + io::Write>(&mut self, w: &mut W, bracket: &[u8]) -> io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            self.line(w, false)?;
        }
        w.write_all(bracket)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.line(w, !first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.line(w, !first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

/// Appends `report`'s absolute path (as this process sees it) to the file `log`, in one
/// write, so that reports of several processes appending at once stay whole lines.
pub fn log_report(log: &str, report: &str) -> io::Result<()> {
    let absolute = std::path::absolute(report)?;
    let mut line = absolute.into_os_string().into_encoded_bytes();
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(log)?;
    io::Write::write_all(&mut file, &line)
}

/// Absolute path of the executable.
pub fn program_path() -> String {
    std::fs::read_link("/proc/self/exe")
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The command line, `argv[0]` first.
pub fn command_line() -> Vec<String> {
    let Ok(mut raw) = std::fs::read("/proc/self/cmdline") else {
        return Vec::new();
    };
    if raw.last() == Some(&0) {
        raw.pop(); // every argument ends with a NUL
    }
    if raw.is_empty() {
        return Vec::new();
    }
    raw.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kage_report::RegionKind;

    #[test]
    fn relative_paths_are_taken_from_where_the_program_started() {
        let dir = Some(std::path::Path::new("/started/here"));
        assert_eq!(
            from_dir("kage.p.7.json", dir),
            "/started/here/kage.p.7.json"
        );
        assert_eq!(from_dir("out/r.json", dir), "/started/here/out/r.json");
        assert_eq!(from_dir("/t/r.json", dir), "/t/r.json");
        assert_eq!(from_dir("r.json", None), "r.json");
    }

    #[test]
    fn devices_are_written_to_not_replaced() {
        let before = std::fs::metadata("/dev/null").unwrap();
        let r = build(ReportInput {
            tool: "count",
            program: "/p".into(),
            args: vec![],
            pid: 1,
            forked_from: None,
            end: ProgramEnd::Exit { code: 0 },
            complete: true,
            unclosed_threads: None,
            threads: 1,
            options: Default::default(),
            regions: &[],
            results: Default::default(),
        });
        write("/dev/null", &r, 1).unwrap();
        let after = std::fs::metadata("/dev/null").unwrap();
        use std::os::unix::fs::MetadataExt;
        assert!(!after.is_file(), "/dev/null is still a device");
        assert_eq!(before.rdev(), after.rdev());
    }

    #[test]
    fn the_pretty_format_is_serde_jsons() {
        let deep = (0..40).fold(
            serde_json::json!([1, {}, []]),
            |inner, i| serde_json::json!({"k": inner, "n": i, "e": {}, "a": [[], [1.5, "x\\n"]]}),
        );
        for value in [deep, serde_json::json!([]), serde_json::json!({"a": null})] {
            let mut ours = Vec::new();
            let mut json = serde_json::Serializer::with_formatter(&mut ours, Pretty::default());
            value.serialize(&mut json).unwrap();
            assert_eq!(
                String::from_utf8(ours).unwrap(),
                serde_json::to_string_pretty(&value).unwrap()
            );
        }
    }

    #[test]
    fn regions_are_written_exactly_as_the_report_model_writes_them() {
        let info = |kind, name: &str, file: &std::sync::Arc<str>, parent, inlined_at| RegionInfo {
            kind,
            name: name.into(),
            symbol: format!("_Z{name}").into(),
            file: file.clone(),
            line: 7,
            end_line: 9,
            parent,
            func: 0,
            code: 0,
            inlined_at,
        };
        let a: std::sync::Arc<str> = "/src/a \"quoted\" \\ dir/é.c".into();
        let b: std::sync::Arc<str> = "/src/b.h".into();
        let regions = vec![
            info(RegionKind::Function, "main", &a, None, None),
            info(RegionKind::Loop, "main", &a, Some(0), None),
            info(
                RegionKind::Function,
                "add<\"x\">",
                &b,
                Some(1),
                Some(crate::registry::InlinedAt {
                    file: a.clone(),
                    line: 12,
                    column: 3,
                }),
            ),
        ];
        let entries = RegionEntries {
            regions: &regions,
            // A tool's map (region 0), none (1), the count tool's counters (2).
            fields: Box::new(|id| match id {
                0 => {
                    let mut m = serde_json::Map::new();
                    m.insert("instances".into(), 5.into());
                    m.insert("zeta".into(), serde_json::json!({"a": [1, 2]}));
                    m.insert("a \"quoted\" name".into(), serde_json::json!([]));
                    RegionMembers::Map(m)
                }
                1 => RegionMembers::Map(serde_json::Map::new()),
                _ => RegionMembers::Count(kage_report::CountStats {
                    instances: 7,
                    inclusive: kage_report::Counters {
                        loads: 1,
                        stores: 2,
                        bytes_read: 3,
                        bytes_written: 4,
                    },
                    exclusive: kage_report::Counters {
                        loads: 5,
                        stores: 6,
                        bytes_read: 7,
                        bytes_written: 8,
                    },
                }),
            }),
        };
        let mut tool_data = serde_json::Map::new();
        tool_data.insert("totals".into(), serde_json::json!({"loads": 3, "x": []}));
        let report = |regions| ReportOf {
            format: FORMAT_NAME.into(),
            version: FORMAT_VERSION,
            tool: "count".into(),
            program: "/bin/\n\"regions\": []".into(),
            args: vec!["x".into(), "\n  \"regions\": []".into()],
            pid: 5,
            forked_from: None,
            end: ProgramEnd::Signal { signal: 11 },
            complete: false,
            unclosed_threads: Some(kage_report::UnclosedThreads {
                blocking: 1,
                stopped: 0,
                unanswered: 2,
            }),
            threads: 2,
            options: [("output".to_string(), "a.json".to_string())].into(),
            regions,
            tool_data: tool_data.clone(),
        };
        let written = report(entries);
        let model = model_of(&written);
        assert_eq!(
            String::from_utf8(json(&written)).unwrap(),
            serde_json::to_string_pretty(&model).unwrap()
        );
        // No regions at all.
        let none = report(RegionEntries {
            regions: &[],
            fields: Box::new(|_| RegionMembers::Map(serde_json::Map::new())),
        });
        assert_eq!(
            String::from_utf8(json(&none)).unwrap(),
            serde_json::to_string_pretty(&model_of(&none)).unwrap()
        );
    }

    /// What [`write_json`] writes.
    fn json(report: &RuntimeReport<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        write_json(&mut out, report).unwrap();
        out
    }

    /// The report model of what the runtime writes: its regions' entries in a `Vec`.
    fn model_of(r: &RuntimeReport<'_>) -> kage_report::Report {
        ReportOf {
            format: r.format.clone(),
            version: r.version,
            tool: r.tool.clone(),
            program: r.program.clone(),
            args: r.args.clone(),
            pid: r.pid,
            forked_from: r.forked_from,
            end: r.end,
            complete: r.complete,
            unclosed_threads: r.unclosed_threads,
            threads: r.threads,
            options: r.options.clone(),
            regions: (0..r.regions.regions.len())
                .map(|id| r.regions.entry(id))
                .collect(),
            tool_data: r.tool_data.clone(),
        }
    }

    #[test]
    fn build_and_write_round_trip() {
        // The tool counts only in registered regions: a module of its own (a function, its
        // loop and the loop's body), whose global ids follow what other tests registered.
        let module = crate::registry::tests::table(
            &[
                (kage_abi::RegionKind::Function as u32, kage_abi::NONE),
                (kage_abi::RegionKind::Loop as u32, 0),
                (kage_abi::RegionKind::LoopBody as u32, 1),
            ],
            "round_trip.c",
        );
        // SAFETY: a complete module table, leaked.
        let base = unsafe {
            crate::registry::register(module);
            (*(*module).regions).global_id
        };
        let info = |kind, line, parent| RegionInfo {
            kind,
            name: "main".into(),
            symbol: "main".into(),
            file: "/a.c".into(),
            line,
            end_line: line + 5,
            parent,
            func: base,
            code: 0,
            inlined_at: None,
        };
        let mut regions: Vec<RegionInfo> = (0..base)
            .map(|id| RegionInfo {
                func: id,
                ..info(RegionKind::Function, 1, None)
            })
            .collect();
        regions.push(info(RegionKind::Function, 3, None));
        regions.push(info(RegionKind::Loop, 4, Some(base)));
        regions.push(info(RegionKind::LoopBody, 4, Some(base + 1)));
        let count = regions.len();
        let tool: &'static crate::tools::count::CountTool =
            Box::leak(Box::new(crate::tools::count::CountTool::new()));
        use crate::tool::Tool;
        let mut t = tool.new_thread();
        t.enter(base);
        t.access(0, 4, false);
        t.exit(base);
        let r = build(ReportInput {
            tool: "count",
            program: "/bin/x".into(),
            args: vec!["x".into()],
            pid: 5,
            forked_from: Some(4),
            end: ProgramEnd::Exit { code: 3 },
            complete: true,
            unclosed_threads: None,
            threads: 1,
            options: crate::options::Options::default().to_map(),
            regions: &regions,
            results: tool.finish(count),
        });
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.json");
        write(p.to_str().unwrap(), &r, 5).unwrap();
        let back = kage_report::read_report(&p).unwrap();
        // What was read is what was built: every field, and each region's entry.
        assert_eq!(back.regions.len(), count);
        for (id, region) in back.regions.iter().enumerate() {
            assert_eq!(*region, r.regions.entry(id));
        }
        assert_eq!(back, model_of(&r));
        assert_eq!(back.regions[base as usize + 1].parent, Some(base));
        let s = kage_report::CountStats::of(&back.regions[base as usize]).unwrap();
        assert_eq!(
            (s.instances, s.inclusive.loads, s.exclusive.bytes_read),
            (1, 1, 4)
        );
        assert_eq!(back.count_totals().unwrap().loads, 1);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temp file left"
        );
    }
}
