import { describe, expect, it } from "@effect/vitest"
import { join } from "node:path"
import { circles } from "../../kernel/test/circles.js"

describe("the sources of this package", () => {
  it("have no import circle (type-only and lazy imports included): each module reads only modules below it", () => {
    expect(circles(join(import.meta.dirname, "..", "src"))).toEqual([])
  })
})
