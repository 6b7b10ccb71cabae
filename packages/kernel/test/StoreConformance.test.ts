import { describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { StateStore, StoreConformance } from "@rx/kernel"

describe("StoreConformance: memory store", () => {
  for (const c of StoreConformance.cases) {
    it.live(c.name, () => c.run.pipe(Effect.provide(StateStore.layerMemory)))
  }
})
