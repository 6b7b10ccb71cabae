import { describe, expect, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import { Issues } from "@rx/kernel"

/** What `Issues.format` says about `value` decoded as a tool input is decoded. */
const said = <A, I>(schema: Schema.Schema<A, I>, value: unknown): string =>
  Either.match(Schema.decodeUnknownEither(schema, { errors: "all", onExcessProperty: "error" })(value), {
    onLeft: Issues.format,
    onRight: () => "(accepted)"
  })

const Count = Schema.Int.pipe(Schema.greaterThanOrEqualTo(1))
const ReadFile = Schema.Struct({
  path: Schema.String,
  offset: Schema.optional(Count),
  limit: Schema.optional(Count)
})

describe("Issues.format", () => {
  it("says what is wrong with each field, in a few words", () => {
    expect(said(ReadFile, { path: 42 })).toBe("path: expected a string, got 42")
    expect(said(ReadFile, { path: "a", limit: 0 })).toBe("limit: expected an integer >= 1, got 0")
    expect(said(ReadFile, { path: "a", limit: 1.5 })).toBe("limit: expected an integer >= 1, got 1.5")
    expect(said(ReadFile, { path: "a", limit: "3" })).toBe("limit: expected an integer >= 1, got \"3\"")
    expect(said(ReadFile, { path: "a", foo: 1 })).toBe("unexpected field \"foo\"")
    expect(said(ReadFile, {})).toBe("missing field \"path\"")
    expect(said(ReadFile, { foo: 1, limit: 0 })).toBe("unexpected field \"foo\"; missing field \"path\"; limit: expected an integer >= 1, got 0")
    expect(said(ReadFile, 5)).toBe("expected an object, got 5")
    expect(said(ReadFile, null)).toBe("expected an object, got null")
  })

  it("names nested fields by their path, and folds unions into one line", () => {
    const Input = Schema.Struct({
      tags: Schema.Array(Schema.Struct({ name: Schema.NonEmptyString })),
      mode: Schema.optional(Schema.Literal("fast", "slow")),
      note: Schema.NullOr(Schema.String),
      depth: Schema.optional(Schema.Int.pipe(Schema.between(1, 10))),
      sha: Schema.optional(Schema.String.pipe(Schema.pattern(/^[0-9a-f]{64}$/))),
      name: Schema.optional(Schema.NonEmptyTrimmedString),
      short: Schema.optional(Schema.String.pipe(Schema.maxLength(3))),
      count: Schema.optional(Schema.Int.pipe(Schema.positive()))
    })
    expect(said(Input, { tags: [{ name: "" }, { name: 3 }, 4, { name: "x", extra: true }], note: null })).toBe(
      "tags[0].name: expected a non-empty string, got \"\"; tags[1].name: expected a non-empty string, got 3; tags[2]: expected an object, got 4; tags[3]: unexpected field \"extra\""
    )
    expect(said(Input, { tags: [], note: null, mode: "medium" })).toBe("mode: expected \"fast\" or \"slow\", got \"medium\"")
    expect(said(Input, { tags: [], note: 1 })).toBe("note: expected a string or null, got 1")
    expect(said(Input, { tags: [], note: null, depth: 11 })).toBe("depth: expected an integer between 1 and 10, got 11")
    expect(said(Input, { tags: [], note: null, sha: "zz" })).toBe("sha: expected a string matching ^[0-9a-f]{64}$, got \"zz\"")
    expect(said(Input, { tags: [], note: null, name: " a" })).toBe(
      "name: expected a non-empty string with no leading or trailing whitespace, got \" a\""
    )
    expect(said(Input, { tags: [], note: null, short: "abcd" })).toBe("short: expected a string of at most 3 characters, got \"abcd\"")
    expect(said(Input, { tags: [], note: null, count: 0 })).toBe("count: expected an integer >= 1, got 0")
  })

  it("keeps long values out: a long string or object is named by its size", () => {
    expect(said(ReadFile, { path: "a".repeat(5_000) as unknown as number, limit: "x".repeat(5_000) })).toBe(
      "limit: expected an integer >= 1, got a string of 5000 characters"
    )
    expect(said(ReadFile, { path: { deep: "y".repeat(100) } })).toBe("path: expected a string, got an object")
  })

  it("uses the wording a Schema's author gave", () => {
    const Absolute = Schema.Struct({
      path: Schema.String.pipe(Schema.filter((s) => s.startsWith("/") || "must be an absolute path")),
      port: Schema.Number.annotations({ message: () => "port must be a number" })
    })
    expect(said(Absolute, { path: "a", port: 80 })).toBe("path: must be an absolute path")
    expect(said(Absolute, { path: "/a", port: "x" })).toBe("port: port must be a number")
  })

  it("names a filter it does not know by its annotations, never by its Schema", () => {
    const Input = Schema.Struct({
      ratio: Schema.Finite,
      id: Schema.String.pipe(Schema.filter((s) => s.startsWith("id-"))),
      sized: Schema.optional(Schema.Struct({ w: Schema.Number }).pipe(Schema.filter((box) => box.w > 0)))
    })
    expect(said(Input, { ratio: Infinity, id: "x" })).toBe("ratio: expected a finite number, got Infinity; id: expected a string that passes a check, got \"x\"")
    expect(said(Input, { ratio: 1, id: "id-1", sized: 5 })).toBe("sized: expected an object that passes a check, got 5")
    expect(said(Input, { ratio: 1, id: "id-1", sized: { w: "x" } })).toBe("sized.w: expected a number, got \"x\"")
  })

  it("lists ten problems at most, then counts the rest", () => {
    const Wide = Schema.Struct({ a: Schema.String })
    const input = Object.fromEntries(Array.from({ length: 15 }, (_, i) => [`f${i}`, i]))
    const lines = Either.match(Schema.decodeUnknownEither(Wide, { errors: "all", onExcessProperty: "error" })(input), {
      onLeft: Issues.lines,
      onRight: () => []
    })
    expect(lines).toHaveLength(11)
    expect(lines[10]).toBe("and 6 more problems")
  })

  it("is one line, with no Schema types in it", () => {
    const text = said(ReadFile, { path: 1, offset: -1, limit: [1, 2], x: { y: 1 } })
    expect(text).not.toMatch(/\n|readonly|└|├|Int &|greaterThanOrEqualTo/)
  })
})
