/* A nest for crates/kage-pass/tests/nest_copies.rs: selected with KAGE_LOOPS=nest_copies.c:8,
 * it calls a static function that nothing else calls. */
static int helper(int x) {
    return x * 3 + 1;
}

int sum(int n) {
    int s = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            s += helper(j);
    return s;
}
