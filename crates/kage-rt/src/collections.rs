//! The runtime's hash maps.

/// A hash map for keys that come from the program's own tables and addresses: SipHash's
/// resistance to chosen keys buys nothing there, and hashing SQLite's 18,551 regions' source
/// keys and interned strings with it took about 5% of its instructions at `--medium`.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
