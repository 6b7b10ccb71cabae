import { describe, expect, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import { Decode } from "../src/index.js"

class Invalid extends Schema.TaggedError<Invalid>()("Invalid", { message: Schema.String }) {}

const Config = Schema.Struct({
  port: Schema.Int.pipe(Schema.between(1, 65535)),
  host: Schema.optionalWith(Schema.String, { default: () => "127.0.0.1" })
})

describe("Decode", () => {
  const decode = Decode.config(Config, (problems) => new Invalid({ message: `invalid test configuration: ${problems}` }))

  it.effect("fills defaults, and reports every problem and every unknown field on one line", () =>
    Effect.gen(function*() {
      expect(yield* decode({ port: 80 })).toEqual({ port: 80, host: "127.0.0.1" })
      const error = yield* Effect.flip(decode({ port: 0, host: 3, prot: 1 }))
      expect(error.message).toMatch(/^invalid test configuration: /)
      expect(error.message).toContain("port")
      expect(error.message).toContain("host")
      expect(error.message).toContain("prot")
      expect(error.message).not.toContain("\n")
    }))

  it.effect("validated checks a value already made, with the same wording", () =>
    Effect.gen(function*() {
      const validate = Decode.validated(Config, (problems) => new Invalid({ message: problems }))
      expect(yield* validate({ port: 8080, host: "h" })).toEqual({ port: 8080, host: "h" })
      const error = yield* Effect.flip(validate({ port: 70000, host: "h" }))
      expect(error.message).toContain("port")
    }))
})
