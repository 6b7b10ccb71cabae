import { describe, expect, it } from "@effect/vitest"
import { Causes } from "../src/index.js"

/** An error wrapping `cause`, as drivers and HTTP clients nest them. */
const wrap = (message: string, cause?: unknown, code?: string): Error =>
  Object.assign(new Error(message, cause === undefined ? undefined : { cause }), code === undefined ? {} : { code })

describe("Causes", () => {
  it("walks cause after cause, outermost first, and stops at the bound or a missing cause", () => {
    const inner = wrap("connect ECONNREFUSED 127.0.0.1:5432", undefined, "ECONNREFUSED")
    const outer = wrap("fetch failed", wrap("SqlError", inner))
    expect(Causes.chain(outer)).toEqual([outer, outer.cause, inner])
    expect(Causes.chain(outer, 2)).toHaveLength(2)
    expect(Causes.chain(undefined)).toEqual([])
    expect(Causes.chain("text")).toEqual(["text"])
  })

  it("a cyclic chain ends at the bound", () => {
    const a: { message: string; cause?: unknown } = { message: "a" }
    a.cause = a
    expect(Causes.chain(a, 5)).toHaveLength(5)
  })

  it("finds the first accepted code and the innermost non-empty message", () => {
    const error = wrap("outer", wrap("", wrap("disk full", undefined, "SQLITE_FULL"), "ERR_WRAPPED"))
    expect(Causes.firstCode(error)).toBe("ERR_WRAPPED")
    expect(Causes.firstCode(error, { accept: (code) => code.startsWith("SQLITE") })).toBe("SQLITE_FULL")
    expect(Causes.firstCode(error, { max: 2, accept: (code) => code.startsWith("SQLITE") })).toBeUndefined()
    expect(Causes.innermostMessage(error)).toBe("disk full")
    expect(Causes.innermostMessage(error, 2)).toBe("outer")
    expect(Causes.innermostMessage(42)).toBe("42")
  })
})
