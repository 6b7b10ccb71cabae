import { describe, layer } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { StoreConformance } from "@rx/kernel/testing"
import { PgStore } from "@rx/store-pg"
import * as TestDatabase from "./database.js"

// One database for the file, shared by all cases (each uses its own goal ids). A snapshot every
// 4 events, so the snapshot case sees one.
const store = Layer.unwrapEffect(
  Effect.map(TestDatabase.TestDatabase, ({ url }) => PgStore.layer({ url, snapshotEvery: 4 }))
).pipe(Layer.provide(TestDatabase.layer))

describe("StoreConformance: Postgres store", () => {
  layer(store, { excludeTestServices: true, timeout: "30 seconds" })((it) => {
    for (const c of StoreConformance.cases) {
      it.effect(c.name, () => c.run)
    }
  })
})
