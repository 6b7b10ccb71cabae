import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, resolve } from "node:path"

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
    // Every relative `import`/`export ... from`, type-only ones included, as an edge between files.
    const edges = new Map(files.map(({ path, text }) => [
      path,
      [...text.matchAll(/(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)\.js"/g)].map((m) => resolve(dirname(path), `${m[1] ?? ""}.ts`))
    ]))
    expect([...edges.values()].flat()).toContain(join(src, "Goal.ts"))
    const done = new Set<string>()
    const circles: Array<string> = []
    const visit = (path: string, trail: ReadonlyArray<string>): void => {
      const at = trail.indexOf(path)
      if (at >= 0) {
        circles.push([...trail.slice(at), path].map((p) => p.slice(src.length + 1)).join(" -> "))
        return
      }
      if (done.has(path)) return
      for (const next of edges.get(path) ?? []) visit(next, [...trail, path])
      done.add(path)
    }
    for (const path of edges.keys()) visit(path, [])
    expect(circles).toEqual([])
  })
})
