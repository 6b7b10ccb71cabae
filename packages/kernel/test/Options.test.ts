import { describe, expect, it } from "@effect/vitest"
import { Arbitrary, Effect, Either, FastCheck as fc, Schema } from "effect"
import { Options } from "@rx/kernel"

const anyOptions = Arbitrary.make(Options.Options)
const decodeSchema = Schema.decodeUnknownEither(Options.Options, { errors: "all", onExcessProperty: "error" })
const fields = Object.keys(Options.Options.fields)

/** Valid options with only some fields given, and variations of them that must be refused or defaulted. */
const candidates = fc.oneof(
  anyOptions.map((o): unknown => o),
  fc.tuple(anyOptions, fc.subarray(fields)).map(([o, keep]): unknown =>
    Object.fromEntries(Object.entries(o).filter(([key]) => keep.includes(key)))),
  fc.tuple(anyOptions, fc.constantFrom(...fields), fc.constantFrom(-1, 0, 1.5, 2_000, "x", null, undefined, {}, [], true)).map(
    ([o, key, value]): unknown => ({ ...o, [key]: value })
  ),
  fc.tuple(anyOptions, fc.string()).map(([o, extra]): unknown => ({ ...o, [`x${extra}`]: 1 })),
  fc.tuple(anyOptions, fc.string()).map(([o, extra]): unknown => ({ ...o, settings: { ...o.settings, [`x${extra}`]: 1 } })),
  // Keys in other orders, at every level.
  anyOptions.map((o): unknown => Object.fromEntries(Object.entries({ ...o, settings: Object.fromEntries(Object.entries(o.settings ?? {}).reverse()) }).reverse())),
  fc.anything()
)

describe("Options.decode", () => {
  it.effect.prop("agrees with the Schema on every input: the same verdict, the same options, keys in the same order at every level", [candidates], ([input]) =>
    Effect.gen(function*() {
      const decoded = yield* Effect.either(Options.decode(input))
      const schema = decodeSchema(input)
      expect(decoded._tag).toBe(schema._tag)
      if (Either.isRight(decoded) && Either.isRight(schema)) {
        expect(decoded.right).toEqual(schema.right)
        expect(JSON.stringify(decoded.right)).toBe(JSON.stringify(schema.right))
        expect(Object.keys(decoded.right)).toEqual(Object.keys(schema.right))
      }
    }), { fastCheck: { numRuns: 600 } })

  it.effect("fills in the defaults, and keeps a field given as undefined to the Schema's verdict", () =>
    Effect.gen(function*() {
      expect(yield* Options.decode({})).toEqual(Options.defaults)
      expect(yield* Options.decode({ maxIterations: 7 })).toEqual({ ...Options.defaults, maxIterations: 7 })
      expect(yield* Options.decode({ maxIterations: undefined })).toEqual(Options.defaults)
      // What is recorded is a copy: changing the input afterwards changes nothing recorded.
      const tools = ["echo"]
      const decoded = yield* Options.decode({ settings: { tools, workspace: "w" } })
      tools.push("shell")
      expect(decoded.settings).toEqual({ workspace: "w", tools: ["echo"] })
      expect(Object.keys(decoded.settings ?? {})).toEqual(["workspace", "tools"])
      const refused = yield* Effect.flip(Options.decode({ maxIterations: 0, extra: 1 }))
      expect(refused.message).toContain("maxIterations")
      expect(refused.message).toContain("extra")
    }))
})
