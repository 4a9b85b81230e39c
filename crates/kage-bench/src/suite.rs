//! The programs of the suite and how to build and run each: the kernels of `bench/kernels/`
//! (one self-contained C file each) and real programs built from C sources bundled in crates.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::sources::CrateSources;

/// The repository's `bench/` directory, fixed at compile time: the harness is a development
/// tool run from the repository, like `scripts/`.
pub fn bench_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench")
}

/// Where a program's C sources come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `bench/kernels/<name>.c`.
    Kernel,
    /// `bench/kernels/<name>.cpp`: C++, linked with the C++ standard library.
    CxxKernel,
    /// Lua 5.4 from `lua-src`, running `bench/programs/lua/bench.lua`.
    Lua,
    /// The SQLite amalgamation from `libsqlite3-sys`, with `bench/programs/sqlite/driver.c`.
    Sqlite,
    /// zstd from `zstd-sys`, with `bench/programs/zstd/driver.c`.
    Zstd,
    /// bzip2 from `bzip2-sys`, with `bench/programs/bzip2/driver.c`.
    Bzip2,
    /// PCRE2's interpreter and DFA matcher from `pcre2-sys` (no JIT), with
    /// `bench/programs/pcre2/driver.c`.
    Pcre2,
    /// `bench/versions/<name>.c`: a kernel whose nests are written in versions (`#pragma
    /// kage versions`), for the select tool.
    Versioned,
}

/// One benchmark program: its name and the arguments for a full and a `--quick` run. Full runs
/// of the kernels pass no size: each kernel's default is the size calibrated to run about
/// 0.5–2 s natively (written in its source).
#[derive(Debug, Clone)]
pub struct Program {
    pub name: &'static str,
    pub origin: Origin,
    full_args: &'static [&'static str],
    quick_args: &'static [&'static str],
    /// `--medium`: about a tenth of the full run's native time, for tools too slow (or too
    /// memory-hungry, like the footprint profiler's baseline) to run the full suite often.
    medium_args: &'static [&'static str],
}

/// How big a run: `--quick`, `--medium` or full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Quick,
    Medium,
    Full,
}

const fn kernel(
    name: &'static str,
    quick_size: &'static [&'static str],
    medium_size: &'static [&'static str],
) -> Program {
    Program {
        name,
        origin: Origin::Kernel,
        full_args: &[],
        quick_args: quick_size,
        medium_args: medium_size,
    }
}

/// Every program, in the order of the table.
pub const SUITE: &[Program] = &[
    kernel("gemm", &["60"], &["700"]),
    kernel("2mm", &["50"], &["600"]),
    kernel("lu", &["80"], &["900"]),
    kernel("covariance", &["60"], &["550"]),
    kernel("atax", &["100"], &["1300"]),
    kernel("jacobi-2d", &["40"], &["650"]),
    kernel("seidel-2d", &["40"], &["650"]),
    kernel("nbody", &["100"], &["1600"]),
    kernel("stream-triad", &["10000"], &["1000000"]),
    kernel("list-chase", &["10000"], &["100000"]),
    kernel("hash-table", &["10000"], &["300000"]),
    kernel("sort", &["10000"], &["1200000"]),
    kernel("threads", &["1"], &["4"]),
    kernel("spmv", &["2000"], &["60000"]),
    kernel("histogram", &["20000"], &["1000000"]),
    kernel("tokenizer", &["1"], &["5"]),
    kernel("bst", &["2000"], &["40000"]),
    kernel("quicksort", &["10000"], &["600000"]),
    kernel("blocks", &["100"], &["5000"]),
    Program {
        name: "stl",
        origin: Origin::CxxKernel,
        full_args: &[],
        quick_args: &["1"],
        medium_args: &["6"],
    },
    Program {
        name: "lua",
        origin: Origin::Lua,
        full_args: &["150"],
        quick_args: &["1"],
        medium_args: &["15"],
    },
    Program {
        name: "sqlite",
        origin: Origin::Sqlite,
        full_args: &[],
        quick_args: &["500"],
        medium_args: &["50000"],
    },
    Program {
        name: "zstd",
        origin: Origin::Zstd,
        full_args: &[],
        quick_args: &["0.05"],
        medium_args: &["3"],
    },
    Program {
        name: "bzip2",
        origin: Origin::Bzip2,
        full_args: &[],
        quick_args: &["0.05"],
        medium_args: &["0.6"],
    },
    Program {
        name: "pcre2",
        origin: Origin::Pcre2,
        full_args: &[],
        quick_args: &["0.05"],
        medium_args: &["0.8"],
    },
];

const fn versioned(name: &'static str, quick_size: &'static [&'static str]) -> Program {
    Program {
        name,
        origin: Origin::Versioned,
        full_args: &[],
        quick_args: quick_size,
        medium_args: &[],
    }
}

/// The select tool's suite (`--tool select`): VMAD's Table 3 kernels, each nest in 4 to 6
/// versions (bench/versions/).
pub const VERSIONED: &[Program] = &[
    versioned("2mm", &["120"]),
    versioned("covariance", &["150"]),
    versioned("gemm", &["120"]),
    versioned("jacobi-2d", &["100", "10"]),
    versioned("lu", &["150"]),
    versioned("matmul", &["120"]),
    versioned("seidel-2d", &["100", "10"]),
];

/// The programs of `suite` whose name contains one of `filters` (all of them when there is
/// none).
pub fn select_from(suite: &[Program], filters: &[String]) -> Vec<Program> {
    suite
        .iter()
        .filter(|p| filters.is_empty() || filters.iter().any(|f| p.name.contains(f.as_str())))
        .cloned()
        .collect()
}

/// The programs whose name contains one of `filters` (all of them when there is none).
pub fn select(filters: &[String]) -> Vec<Program> {
    SUITE
        .iter()
        .filter(|p| filters.is_empty() || filters.iter().any(|f| p.name.contains(f.as_str())))
        .cloned()
        .collect()
}

/// Everything a compiler needs to build one program.
#[derive(Debug, Clone)]
pub struct Recipe {
    pub sources: Vec<PathBuf>,
    /// Preprocessor and language flags (`-I`, `-D`, `-std=`), on top of `-O2`.
    pub cflags: Vec<String>,
    /// Link flags after the objects (`-lm`).
    pub libs: Vec<String>,
}

impl Program {
    /// The arguments to run the program with.
    pub fn args(&self, size: Size) -> Vec<String> {
        let size = match size {
            Size::Quick => self.quick_args,
            Size::Medium => self.medium_args,
            Size::Full => self.full_args,
        };
        let script = match self.origin {
            Origin::Lua => vec![bench_dir()
                .join("programs/lua/bench.lua")
                .display()
                .to_string()],
            _ => vec![],
        };
        script
            .into_iter()
            .chain(size.iter().map(|s| s.to_string()))
            .collect()
    }

    /// Whether building this program needs crate sources (and so `cargo metadata`).
    pub fn needs_crate_sources(&self) -> bool {
        !matches!(
            self.origin,
            Origin::Kernel | Origin::CxxKernel | Origin::Versioned
        )
    }

    pub fn recipe(&self, crates: Option<&CrateSources>) -> Result<Recipe> {
        let bench = bench_dir();
        let driver = |dir: &str| bench.join("programs").join(dir).join("driver.c");
        let crates = || crates.context("crate sources were not located");
        Ok(match self.origin {
            Origin::Kernel => Recipe {
                sources: vec![bench.join("kernels").join(format!("{}.c", self.name))],
                cflags: vec![],
                libs: vec!["-lm".into()],
            },
            Origin::CxxKernel => Recipe {
                // The C compiler drivers compile `.cpp` as C++; the link needs the library.
                sources: vec![bench.join("kernels").join(format!("{}.cpp", self.name))],
                cflags: vec!["-std=c++17".into()],
                libs: vec!["-lstdc++".into(), "-lm".into()],
            },
            Origin::Versioned => Recipe {
                sources: vec![bench.join("versions").join(format!("{}.c", self.name))],
                cflags: vec![],
                libs: vec!["-lm".into()],
            },
            Origin::Lua => {
                let dir = crates()?.lua_dir()?;
                // lua-src ships the library only (no lua.c/luac.c); skip them should they appear.
                let mut sources = c_files_in(&dir)?;
                sources.retain(|p| !matches!(file_name(p), "lua.c" | "luac.c" | "onelua.c"));
                // The same Lua host the end-to-end tests build (tests/c/lua).
                sources.push(bench.join("../tests/c/lua/driver.c"));
                Recipe {
                    sources,
                    // A fixed string-hash seed and sort pivot (Lua mixes the clock into
                    // both), and a C API string cache of one slot (the slot was chosen by
                    // the C string's address, which differs between builds): every run
                    // and every build does the same work, so the reports of different
                    // configurations and builds compare.
                    cflags: vec![
                        "-std=gnu99".into(),
                        "-DLUA_USE_LINUX".into(),
                        "-Dluai_makeseed(L)=0u".into(),
                        "-Dl_randomizePivot()=0u".into(),
                        "-DSTRCACHE_N=1".into(),
                        "-DSTRCACHE_M=1".into(),
                        include(&dir),
                    ],
                    libs: vec!["-lm".into(), "-ldl".into()],
                }
            }
            Origin::Sqlite => {
                let dir = crates()?.sqlite_dir()?;
                Recipe {
                    sources: vec![dir.join("sqlite3.c"), driver("sqlite")],
                    // Single-threaded and without dlopen: nothing to link beyond libm.
                    cflags: vec![
                        "-DSQLITE_THREADSAFE=0".into(),
                        "-DSQLITE_OMIT_LOAD_EXTENSION".into(),
                        include(&dir),
                    ],
                    libs: vec!["-lm".into()],
                }
            }
            Origin::Zstd => {
                let lib = crates()?.zstd_lib_dir()?;
                let mut sources = Vec::new();
                for part in ["common", "compress", "decompress"] {
                    sources.extend(c_files_in(&lib.join(part))?);
                }
                sources.push(driver("zstd"));
                Recipe {
                    sources,
                    // The portable C Huffman decoder instead of the x86-64 assembly one: the
                    // pass only sees code that goes through LLVM IR.
                    cflags: vec!["-DZSTD_DISABLE_ASM".into(), include(&lib)],
                    libs: vec![],
                }
            }
            Origin::Bzip2 => {
                let dir = crates()?.bzip2_dir()?;
                let library = [
                    "blocksort",
                    "huffman",
                    "crctable",
                    "randtable",
                    "compress",
                    "decompress",
                    "bzlib",
                ];
                let mut sources: Vec<PathBuf> =
                    library.iter().map(|f| dir.join(format!("{f}.c"))).collect();
                sources.push(driver("bzip2"));
                Recipe {
                    sources,
                    cflags: vec![include(&dir)],
                    libs: vec![],
                }
            }
            Origin::Pcre2 => {
                let dir = crates()?.pcre2_dir()?;
                let src = dir.join("src");
                let mut sources = c_files_in(&src)?;
                // The JIT's matcher and helpers are included by pcre2_jit_compile.c, and
                // the Unicode property tables by pcre2_tables.c (as pcre2-sys builds it).
                sources.retain(|p| {
                    !matches!(
                        file_name(p),
                        "pcre2_jit_match.c" | "pcre2_jit_misc.c" | "pcre2_ucptables.c"
                    )
                });
                sources.push(driver("pcre2"));
                Recipe {
                    sources,
                    // No SUPPORT_JIT: the matchers the pass sees are the interpreters; a
                    // JIT's generated code would run uninstrumented.
                    cflags: vec![
                        "-DPCRE2_CODE_UNIT_WIDTH=8".into(),
                        "-DHAVE_CONFIG_H".into(),
                        "-DPCRE2_STATIC".into(),
                        "-DSUPPORT_PCRE2_8".into(),
                        "-DSUPPORT_UNICODE".into(),
                        "-DHAVE_STDLIB_H".into(),
                        "-DHAVE_MEMMOVE".into(),
                        "-DSTDC_HEADERS".into(),
                        include(&src),
                        include(&dir.join("include")),
                    ],
                    libs: vec![],
                }
            }
        })
    }
}

fn include(dir: &Path) -> String {
    format!("-I{}", dir.display())
}

fn file_name(path: &Path) -> &str {
    path.file_name().and_then(|n| n.to_str()).unwrap_or("")
}

/// The `.c` files directly in `dir`, sorted so builds are reproducible.
fn c_files_in(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .collect();
    files.sort();
    Ok(files)
}
