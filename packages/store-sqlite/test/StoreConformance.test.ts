import { afterAll, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { StoreConformance } from "@rx/kernel/testing"
import { SqliteStore } from "@rx/store-sqlite"

// One file per synchronous level, shared by all cases (each uses its own goal ids). A snapshot
// every 4 events, so the snapshot case sees one.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "rx-conformance-"))
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

for (const synchronous of ["FULL", "NORMAL"] as const) {
  describe(`StoreConformance: SQLite store, synchronous=${synchronous}`, () => {
    const store = SqliteStore.layer({ filename: path.join(dir, `${synchronous}.db`), synchronous, pollIntervalMs: 20, snapshotEvery: 4 })
    for (const c of StoreConformance.cases) {
      it.live(c.name, () => c.run.pipe(Effect.provide(store)))
    }
  })
}
