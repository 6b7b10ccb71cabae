/**
 * Import circles among a package's source files: every relative `import`, `export ... from` and
 * `import("...")`, type-only and lazy ones included, is an edge between files. Each package's
 * `Circles.test.ts` asserts there are none, so each module reads only modules below it.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, resolve } from "node:path"

const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    return statSync(path).isDirectory() ? sources(path) : /\.tsx?$/.test(path) && !path.endsWith(".d.ts") ? [path] : []
  })

const relative = /(?:(?:import|export)\s[^;]*?from\s+|import\(\s*)"(\.{1,2}\/[^"]+)\.js"/g

/** The edges of `src`'s files, by file: each file it imports. */
export const edges = (src: string): ReadonlyMap<string, ReadonlyArray<string>> =>
  new Map(sources(src).map((path) => [path, [...readFileSync(path, "utf8").matchAll(relative)].map((m) => resolve(dirname(path), `${m[1] ?? ""}.ts`))]))

/** Each circle found, as `A.ts -> B.ts -> A.ts` (relative to `src`). */
export const circles = (src: string): ReadonlyArray<string> => {
  const graph = edges(src)
  const done = new Set<string>()
  const found: Array<string> = []
  const visit = (path: string, trail: ReadonlyArray<string>): void => {
    const at = trail.indexOf(path)
    if (at >= 0) {
      found.push([...trail.slice(at), path].map((p) => p.slice(src.length + 1)).join(" -> "))
      return
    }
    if (done.has(path)) return
    for (const next of graph.get(path) ?? []) visit(next, [...trail, path])
    done.add(path)
  }
  for (const path of graph.keys()) visit(path, [])
  return found
}
