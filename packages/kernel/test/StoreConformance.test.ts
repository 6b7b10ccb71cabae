import { describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { StateStore } from "@rx/kernel"
import { StoreConformance } from "@rx/kernel/testing"

describe("StoreConformance: memory store", () => {
  for (const c of StoreConformance.cases) {
    it.live(c.name, () => c.run.pipe(Effect.provide(StateStore.layerMemory)))
  }
})

// A store without its own `first` and `follow`: `StateStore.first` and `StateStore.follow` fall back to `changes`.
const withoutFirst = Layer.effect(
  StateStore.StateStore,
  Effect.map(StateStore.makeMemory, ({ first: _first, follow: _follow, ...rest }) => StateStore.StateStore.of(rest))
)

describe("StoreConformance: a store without first and follow", () => {
  for (const c of StoreConformance.cases) {
    it.live(c.name, () => c.run.pipe(Effect.provide(withoutFirst)))
  }
})
