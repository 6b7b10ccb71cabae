import { describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { StateStore, StoreConformance } from "@rx/kernel"

describe("StoreConformance: memory store", () => {
  for (const c of StoreConformance.cases) {
    it.live(c.name, () => c.run.pipe(Effect.provide(StateStore.layerMemory)))
  }
})

// A store without its own `first`: `StateStore.first` falls back to the head of `changes`.
const withoutFirst = Layer.effect(
  StateStore.StateStore,
  Effect.map(StateStore.makeMemory, ({ first: _first, ...rest }) => StateStore.StateStore.of(rest))
)

describe("StoreConformance: a store without first", () => {
  for (const c of StoreConformance.cases) {
    it.live(c.name, () => c.run.pipe(Effect.provide(withoutFirst)))
  }
})
