import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { join } from "node:path"
import { circles, edges } from "./circles.js"

const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : []
  })

const src = join(import.meta.dirname, "..", "src")

describe("the kernel's sources", () => {
  const files = sources(src).map((path) => ({ path, text: readFileSync(path, "utf8") }))

  it("are all found", () => {
    expect(files.map((f) => f.path)).toContain(join(src, "Runner.ts"))
  })

  it("never read the wall clock or a random source: time comes from Clock, ids are derived", () => {
    const offenders = files.flatMap(({ path, text }) =>
      [/Date\.now\s*\(/, /new Date\s*\(/, /Math\.random\s*\(/, /performance\.now\s*\(/, /crypto\.randomUUID/]
        .filter((pattern) => pattern.test(text))
        .map((pattern) => `${path}: ${pattern}`)
    )
    expect(offenders).toEqual([])
  })

  it("import only effect, @rx/formats and each other", () => {
    const imports = files.flatMap(({ path, text }) =>
      [...text.matchAll(/from\s+"([^"]+)"/g)].map((m) => ({ path, spec: m[1] ?? "" }))
    )
    // The model formats are decoded by @rx/formats, which itself imports only effect.
    const foreign = imports.filter(({ spec }) => spec !== "effect" && spec !== "@rx/formats" && !spec.startsWith("./") && !spec.startsWith("../"))
    expect(foreign).toEqual([])
  })

  it("have no import circle: each module reads only modules below it", () => {
    expect([...edges(src).values()].flat()).toContain(join(src, "Goal.ts"))
    expect(circles(src)).toEqual([])
  })
})
