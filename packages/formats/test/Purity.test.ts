import { describe, expect, it } from "@effect/vitest"
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, resolve } from "node:path"

const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : []
  })

const src = join(import.meta.dirname, "..", "src")

describe("the decoder's sources", () => {
  const files = sources(src).map((path) => ({ path, text: readFileSync(path, "utf8") }))

  it("are all found", () => {
    expect(files.map((f) => f.path)).toContain(join(src, "internal", "v5.ts"))
  })

  it("import nothing but each other (a decoding is a pure function of its text: no clock, no random source, no I/O)", () => {
    const imports = files.flatMap(({ path, text }) => [...text.matchAll(/from\s+"([^"]+)"/g)].map((m) => ({ path, spec: m[1] ?? "" })))
    expect(imports.filter(({ spec }) => !spec.startsWith("./") && !spec.startsWith("../"))).toEqual([])
    const impure = files.filter(({ text }) => [/Date\.now\s*\(/, /new Date\s*\(/, /Math\.random\s*\(/].some((p) => p.test(text)))
    expect(impure.map((f) => f.path)).toEqual([])
  })

  it("have no import circle", () => {
    const edges = new Map(files.map(({ path, text }) => [
      path,
      [...text.matchAll(/(?:import|export)\s[^;]*?from\s+"(\.{1,2}\/[^"]+)\.js"/g)].map((m) => resolve(dirname(path), `${m[1] ?? ""}.ts`))
    ]))
    const circles: Array<string> = []
    const done = new Set<string>()
    const visit = (path: string, trail: ReadonlyArray<string>): void => {
      if (trail.includes(path)) {
        circles.push([...trail.slice(trail.indexOf(path)), path].join(" -> "))
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
