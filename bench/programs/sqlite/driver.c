/* An in-memory SQLite workload for the benchmark suite: n inserts in one transaction through
 * a prepared statement, an index build, point lookups, an aggregate with GROUP BY and a
 * self-join. In memory so the disk does not add noise. Usage: sqlite-bench [n]. Prints a
 * checksum of every query's results. */
#include <stdio.h>
#include <stdlib.h>
#include "sqlite3.h"

static void check(int rc, sqlite3 *db, const char *what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
    exit(1);
  }
}

static void exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "%s: %s\n", sql, err);
    exit(1);
  }
}

/* Runs a query whose rows are all integers and folds them into the checksum. */
static unsigned long long fold_query(sqlite3 *db, const char *sql, unsigned long long sum) {
  sqlite3_stmt *stmt;
  check(sqlite3_prepare_v2(db, sql, -1, &stmt, NULL), db, sql);
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW)
    for (int c = 0; c < sqlite3_column_count(stmt); c++)
      sum = sum * 1000003 + (unsigned long long)sqlite3_column_int64(stmt, c);
  check(rc, db, sql);
  sqlite3_finalize(stmt);
  return sum;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 500000;
  sqlite3 *db;
  check(sqlite3_open(":memory:", &db), db, "open");
  exec(db, "CREATE TABLE items(id INTEGER PRIMARY KEY, grp INTEGER, score INTEGER, name TEXT)");

  exec(db, "BEGIN");
  sqlite3_stmt *insert;
  check(sqlite3_prepare_v2(db, "INSERT INTO items(grp, score, name) VALUES(?, ?, ?)", -1,
                           &insert, NULL), db, "prepare insert");
  unsigned long long x = 12345;
  for (long i = 0; i < n; i++) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    char name[32];
    snprintf(name, sizeof name, "item-%llu", (x >> 40) % 50000);
    sqlite3_bind_int64(insert, 1, (sqlite3_int64)((x >> 33) % 100));
    sqlite3_bind_int64(insert, 2, (sqlite3_int64)((x >> 20) % 1000000));
    sqlite3_bind_text(insert, 3, name, -1, SQLITE_TRANSIENT);
    check(sqlite3_step(insert), db, "insert");
    sqlite3_reset(insert);
  }
  sqlite3_finalize(insert);
  exec(db, "COMMIT");
  exec(db, "CREATE INDEX items_name ON items(name)");

  unsigned long long sum = 0;
  sqlite3_stmt *lookup;
  check(sqlite3_prepare_v2(db, "SELECT count(*), coalesce(sum(score), 0) FROM items WHERE name = ?",
                           -1, &lookup, NULL), db, "prepare lookup");
  for (long i = 0; i < n / 4; i++) {
    char name[32];
    snprintf(name, sizeof name, "item-%ld", (i * 7919) % 50000);
    sqlite3_bind_text(lookup, 1, name, -1, SQLITE_TRANSIENT);
    if (sqlite3_step(lookup) == SQLITE_ROW)
      sum = sum * 31 + (unsigned long long)sqlite3_column_int64(lookup, 0) +
            (unsigned long long)sqlite3_column_int64(lookup, 1);
    sqlite3_reset(lookup);
  }
  sqlite3_finalize(lookup);

  sum = fold_query(db, "SELECT grp, count(*), sum(score), max(score) FROM items GROUP BY grp ORDER BY grp", sum);
  sum = fold_query(db, "SELECT count(*) FROM items a JOIN items b ON a.name = b.name "
                       "WHERE a.grp = 7 AND b.grp = 8", sum);
  sum = fold_query(db, "SELECT id FROM items ORDER BY score DESC, id LIMIT 100", sum);
  sqlite3_close(db);
  printf("sqlite n=%ld checksum=%llu\n", n, sum);
  return 0;
}
