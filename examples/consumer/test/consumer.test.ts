/**
 * rx as a new user gets it. Every package is packed as `changeset publish` would publish it
 * (`scripts/release-pack.mjs`), the tarballs are installed with npm into new apps outside the
 * workspace, and the README's example ("Using the kernel", with the tsconfig of "Use rx in your
 * app") is type-checked and run: once with the lowest and once with the highest versions the
 * packages' peer ranges allow. A second pair of apps installs `@rx/kernel` alone (with
 * `@rx/formats`, its one dependency), which must bring no native addon and no install script.
 *
 * Needs `pnpm build` first (`pnpm test` runs it) and the npm registry, or a warm npm cache:
 * `RX_CONSUMER_NPM_CACHE`, default `<tmpdir>/rx-consumer-npm-cache`, shared by every app.
 */
import { afterAll, beforeAll, describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { execFile } from "node:child_process"
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { tmpdir } from "node:os"
import { join, relative, resolve } from "node:path"
import { pathToFileURL } from "node:url"

const root = resolve(import.meta.dirname, "..", "..", "..")
const readme = readFileSync(join(root, "README.md"), "utf8")
const cache = process.env["RX_CONSUMER_NPM_CACHE"] ?? join(tmpdir(), "rx-consumer-npm-cache")

// ---------------------------------------------------------------------------------------------
// Running programs

const tail = (text: string) => text.split("\n").slice(-40).join("\n")

interface Output {
  readonly stdout: string
  readonly stderr: string
}

const run = (command: string, args: ReadonlyArray<string>, cwd: string, env: NodeJS.ProcessEnv) =>
  Effect.async<Output, Error>((resume) => {
    const child = execFile(command, [...args], { cwd, env, maxBuffer: 256 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error === null) resume(Effect.succeed({ stdout, stderr }))
      else {
        const shown = [command, ...args].map((a) => (a.startsWith(cwd) ? relative(cwd, a) : a)).join(" ")
        resume(Effect.fail(new Error(`${shown} (in ${cwd}): ${error.message}\n${tail(stdout)}\n${tail(stderr)}`)))
      }
    })
    return Effect.sync(() => child.kill("SIGKILL"))
  })

/** npm's configuration for a user's shell: what pnpm and vitest set for their own children goes. */
const userEnv = (): NodeJS.ProcessEnv => {
  const keep = /^npm_config_(registry|cafile|ca|strict_ssl|proxy|https_proxy|noproxy|@.*:registry|\/\/.*)$/i
  const env: NodeJS.ProcessEnv = {}
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(npm|pnpm)_/i.test(key) && !keep.test(key)) continue
    if (["NODE_ENV", "NODE_OPTIONS", "FORCE_COLOR"].includes(key) || key.startsWith("VITEST")) continue
    env[key] = value
  }
  return { ...env, npm_config_cache: cache, npm_config_update_notifier: "false", NO_COLOR: "1" }
}

const npm = (args: ReadonlyArray<string>, cwd: string) => run("npm", args, cwd, userEnv())
const node = (args: ReadonlyArray<string>, cwd: string) => run(process.execPath, args, cwd, userEnv())

// ---------------------------------------------------------------------------------------------
// Versions and caret ranges (the only kind of range the packages use)

type Version = readonly [number, number, number]

const parse = (text: string): Version | undefined => {
  const m = /^(\d+)\.(\d+)\.(\d+)$/.exec(text)
  return m === null ? undefined : [Number(m[1]), Number(m[2]), Number(m[3])]
}
const show = (v: Version) => v.join(".")
const compare = (a: Version, b: Version) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2]
/** The floor of `^x.y.z`. */
const caretFloor = (range: string) => (range.startsWith("^") ? parse(range.slice(1)) : undefined)
/** npm's caret: the leftmost non-zero part is fixed. */
const satisfies = (v: Version, floor: Version) =>
  compare(v, floor) >= 0 &&
  (floor[0] > 0 ? v[0] === floor[0] : floor[1] > 0 ? v[0] === 0 && v[1] === floor[1] : v[0] === 0 && v[1] === 0 && v[2] === floor[2])

// ---------------------------------------------------------------------------------------------
// The packed packages

interface Manifest {
  readonly name: string
  readonly version: string
  readonly license?: string
  readonly private?: boolean
  readonly files?: ReadonlyArray<string>
  readonly bin?: Record<string, string>
  readonly keywords?: ReadonlyArray<string>
  readonly homepage?: string
  readonly repository?: { readonly url?: string; readonly directory?: string }
  readonly publishConfig?: { readonly access?: string }
  readonly dependencies?: Record<string, string>
  readonly peerDependencies?: Record<string, string>
  readonly devDependencies?: Record<string, string>
}

interface Packed {
  readonly file: string
  readonly dir: string
  readonly manifest: Manifest
  readonly entries: ReadonlyArray<string>
}

const readJson = (path: string): unknown => JSON.parse(readFileSync(path, "utf8"))
const manifestAt = (dir: string) => readJson(join(dir, "package.json")) as Manifest

let work = ""
let packed: ReadonlyArray<Packed> = []
const pkg = (name: string) => {
  const found = packed.find((p) => p.manifest.name === name)
  expect(found, `${name} was not packed`).toBeDefined()
  return found as Packed
}

/** Pack once: what `pnpm release:pack` writes, from the current build. */
const pack = Effect.gen(function*() {
  const dest = join(work, "tarballs")
  const { stdout } = yield* node([join(root, "scripts", "release-pack.mjs"), dest], root)
  const files = stdout.split("\n").map((line) => line.trim()).filter((line) => line.endsWith(".tgz"))
  const workspace = new Map<string, string>()
  for (const parent of ["packages", "examples"]) {
    for (const name of readdirSync(join(root, parent))) {
      const dir = join(root, parent, name)
      if (existsSync(join(dir, "package.json"))) workspace.set(manifestAt(dir).name, dir)
    }
  }
  return yield* Effect.forEach(files, (file) =>
    Effect.gen(function*() {
      const manifest = JSON.parse((yield* run("tar", ["-xzf", file, "-O", "package/package.json"], work, userEnv())).stdout) as Manifest
      const entries = (yield* run("tar", ["-tzf", file], work, userEnv())).stdout.split("\n").filter((e) => e !== "")
      const dir = workspace.get(manifest.name)
      expect(dir, `${manifest.name} is not a workspace package`).toBeDefined()
      return { file, dir: dir as string, manifest, entries }
    }))
})

/** For each peer of `packages`: the ranges asking for it, its lowest allowed version and the narrowest range. */
const peersOf = (packages: ReadonlyArray<Packed>) => {
  const asked = new Map<string, Array<{ readonly by: string; readonly range: string }>>()
  for (const p of packages) {
    for (const [name, range] of Object.entries(p.manifest.peerDependencies ?? {})) {
      asked.set(name, [...(asked.get(name) ?? []), { by: p.manifest.name, range }])
    }
  }
  return [...asked].sort(([a], [b]) => a.localeCompare(b)).map(([name, ranges]) => {
    const floors = ranges.map((r) => {
      const floor = caretFloor(r.range)
      expect(floor, `${r.by} asks for ${name} "${r.range}": this test knows only ^x.y.z ranges`).toBeDefined()
      return { ...r, floor: floor as Version }
    })
    const narrowest = floors.reduce((a, b) => (compare(a.floor, b.floor) >= 0 ? a : b))
    for (const r of floors) {
      expect(satisfies(narrowest.floor, r.floor), `${name}: ${r.by} "${r.range}" and ${narrowest.by} "${narrowest.range}" do not meet`).toBe(true)
    }
    return { name, ranges: floors, lowest: show(narrowest.floor), narrowest: narrowest.range }
  })
}

// ---------------------------------------------------------------------------------------------
// The README

/** The body of a `## heading` section, up to the next `## `. */
const section = (heading: string) => {
  const start = readme.indexOf(`\n## ${heading}\n`)
  expect(start, `README.md has no "## ${heading}" section`).toBeGreaterThanOrEqual(0)
  const rest = readme.slice(start + heading.length + 5)
  const end = rest.search(/\n## /)
  return end === -1 ? rest : rest.slice(0, end)
}
/** The first fenced block of `lang` in `text` (after `after`, if given). */
const block = (text: string, lang: string, after = "") => {
  const from = after === "" ? 0 : text.indexOf(after)
  expect(from, `README.md: "${after}" not found`).toBeGreaterThanOrEqual(0)
  const m = new RegExp("```" + lang + "\\n([\\s\\S]*?)\\n```").exec(text.slice(from))
  expect(m, `README.md: no \`\`\`${lang} block${after === "" ? "" : ` after "${after}"`}`).not.toBeNull()
  return `${(m as RegExpExecArray)[1]}\n`
}

const example = () => block(section("Using the kernel"), "ts")
const tsconfig = () => block(section("Use rx in your app"), "json")
const testExample = () => block(section("Use rx in your app"), "ts", "### Test it")
const evalExample = () => block(section("Use rx in your app"), "ts", "### Evaluate another model")

// ---------------------------------------------------------------------------------------------
// Apps

/** The version the workspace uses: the root's, else the exact one a package declares. */
const workspaceVersion = (name: string) => {
  const atRoot = join(root, "node_modules", name, "package.json")
  if (existsSync(atRoot)) return (readJson(atRoot) as Manifest).version
  const declared = packed.map((p) => manifestAt(p.dir)).map((m) => m.devDependencies?.[name] ?? m.dependencies?.[name])
  const exact = declared.find((v) => v !== undefined && parse(v) !== undefined)
  expect(exact, `no exact version of ${name} in the workspace`).toBeDefined()
  return exact as string
}

interface App {
  readonly dir: string
  readonly versions: ReadonlyMap<string, string>
}

/** node-llama-cpp's CPU build for this platform, as @rx/llama's install hint names it (from its build: `pnpm build` first). */
const cpuPackage = Effect.promise(async () => {
  const install: { readonly cpuPackage: (platform: string, arch: string) => string | undefined } = await import(
    pathToFileURL(join(pkg("@rx/llama").dir, "dist", "src", "Install.js")).href
  )
  return install.cpuPackage(process.platform, process.arch)
})

/** A new folder outside the workspace: `package.json`, the README's tsconfig and example, then one `npm install`. */
const makeApp = (
  name: string,
  packages: ReadonlyArray<Packed>,
  pick: "lowest" | "highest",
  options: {
    readonly dev: ReadonlyArray<string>
    readonly files?: Record<string, string>
    readonly ignoreScripts: boolean
    /** Optional peers left out of this app. */
    readonly without?: ReadonlyArray<string>
    /**
     * node-llama-cpp as its install hint has users install it (`Install.hint`): optional
     * dependencies left out, and the one CPU build of this platform named instead of every GPU build.
     */
    readonly llamaCpuOnly?: boolean
  }
) =>
  Effect.gen(function*() {
    const dir = join(work, name)
    expect(relative(root, dir).startsWith(".."), `${dir} is inside the workspace`).toBe(true)
    mkdirSync(dir)
    const dev = Object.fromEntries(options.dev.map((d) => [d, workspaceVersion(d)]))
    writeFileSync(join(dir, "package.json"), JSON.stringify({ name: `app-${name}`, private: true, type: "module", devDependencies: dev }, null, 2))
    writeFileSync(join(dir, "tsconfig.json"), tsconfig())
    writeFileSync(join(dir, "main.ts"), example())
    for (const [file, text] of Object.entries(options.files ?? {})) writeFileSync(join(dir, file), text)

    // A peer that is itself one of the tarballs (@rx/llama, an optional peer of @rx/cli) comes from its tarball.
    const peers = peersOf(packages).filter((p) => !packed.some((q) => q.manifest.name === p.name) && !(options.without ?? []).includes(p.name))
    const specs = peers.map((p) => `${p.name}@${pick === "lowest" ? p.lowest : p.narrowest}`)
    const llama = peers.find((p) => p.name === "node-llama-cpp")
    const cpu = options.llamaCpuOnly === true && llama !== undefined ? yield* cpuPackage : undefined
    // The CPU build's version is node-llama-cpp's own: the lowest allowed here, as the app pins it.
    if (cpu !== undefined && llama !== undefined) expect(pick, "the CPU build is pinned to the lowest node-llama-cpp").toBe("lowest")
    const cpuOnly = cpu === undefined || llama === undefined ? [] : ["--omit=optional", `${cpu}@${llama.lowest}`]
    yield* npm(
      ["install", "--no-audit", "--no-fund", "--prefer-offline", ...(options.ignoreScripts ? ["--ignore-scripts"] : []), ...cpuOnly, ...packages.map((p) => p.file), ...specs],
      dir
    )
    // Exits non-zero on a missing or invalid dependency or peer anywhere in the tree.
    yield* npm(["ls", "--all"], dir)

    const versions = new Map<string, string>()
    for (const p of peers) {
      const installed = (readJson(join(dir, "node_modules", p.name, "package.json")) as Manifest).version
      versions.set(p.name, installed)
      const v = parse(installed)
      expect(v, `${p.name} ${installed}`).toBeDefined()
      for (const r of p.ranges) expect(satisfies(v as Version, r.floor), `${p.name} ${installed} is outside ${r.by}'s "${r.range}"`).toBe(true)
      if (pick === "lowest") expect(installed, p.name).toBe(p.lowest)
    }
    expect(versions.get("effect")?.startsWith("3."), `effect ${versions.get("effect")} is not Effect 3`).toBe(true)
    console.log(`${name}: ${[...versions].map(([n, v]) => `${n} ${v}`).join(", ")}`)
    return { dir, versions } satisfies App
  })

/** `tsc` with the README's tsconfig (strict, NodeNext, lib checks on), then run the example: it prints `done`. */
const compileAndRun = (app: App) =>
  Effect.gen(function*() {
    yield* node([join(app.dir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.json"], app.dir)
    const { stdout } = yield* node([join(app.dir, "dist", "main.js")], app.dir)
    expect(stdout.trim().split("\n").at(-1)).toBe("done")
  })

/** The shipped sources compile against the installed peers, under the flags they are written with. */
const compileSources = (app: App, packages: ReadonlyArray<Packed>, types: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const base = readJson(join(root, "tsconfig.base.json")) as { compilerOptions: Record<string, unknown> }
    const flags = { ...base.compilerOptions }
    for (const key of ["composite", "declaration", "declarationMap", "sourceMap", "incremental", "customConditions"]) delete flags[key]
    const config = {
      compilerOptions: { ...flags, noEmit: true, skipLibCheck: true, types },
      include: packages.map((p) => `node_modules/${p.manifest.name}/src/**/*.ts`),
      exclude: []
    }
    writeFileSync(join(app.dir, "tsconfig.sources.json"), JSON.stringify(config, null, 2))
    yield* node([join(app.dir, "node_modules", "typescript", "bin", "tsc"), "-p", "tsconfig.sources.json"], app.dir)
  })

/** Every installed package: none may be a native addon or run an install script. */
const nativeOrScripted = (dir: string) => {
  const found: Array<string> = []
  const walk = (path: string) => {
    for (const name of readdirSync(path)) {
      const child = join(path, name)
      const stat = statSync(child)
      if (stat.isDirectory()) walk(child)
      else if (name.endsWith(".node") || name === "binding.gyp") found.push(relative(dir, child))
      else if (name === "package.json") {
        const m = readJson(child) as { scripts?: Record<string, string>; gypfile?: boolean }
        const scripts = ["preinstall", "install", "postinstall"].filter((s) => m.scripts?.[s] !== undefined)
        if (scripts.length > 0 || m.gypfile === true) found.push(`${relative(dir, child)} (${scripts.join(", ") || "gypfile"})`)
      }
    }
  }
  walk(join(dir, "node_modules"))
  return found
}

/** Loads every package and runs the `rx` binary: a dependency the code needs but the package does not declare shows here. */
const loadAll = (app: App, packages: ReadonlyArray<Packed>) =>
  Effect.gen(function*() {
    const names = packages.map((p) => p.manifest.name)
    const { stdout } = yield* node(
      ["--input-type=module", "-e", `for (const p of ${JSON.stringify(names)}) console.log(p, Object.keys(await import(p)).length)`],
      app.dir
    )
    for (const name of names) expect(stdout).toContain(`${name} `)
    const help = yield* node([join(app.dir, "node_modules", ".bin", "rx"), "--help"], app.dir)
    expect(help.stdout).toContain("rx")
  })

/**
 * A goal run by @rx/llama's Layer on its tiny GGUF: node-llama-cpp as its install hint has users
 * install it (the CPU build only), with no install script run, so its prebuilt binary package
 * works with nothing downloaded or built.
 * (Not through `rx run`: with scripts off, better-sqlite3 has no binary for the log.)
 */
const runLocalModel = (app: App) =>
  Effect.gen(function*() {
    const script = [
      `import { Runner, StateStore, Tool, ToolRegistry } from "@rx/kernel"`,
      `import { LlamaCpp, TinyGguf } from "@rx/llama"`,
      `import { Effect, Layer } from "effect"`,
      `TinyGguf.writeTinyGguf("tiny.gguf")`,
      `const model = LlamaCpp.layer({ modelFile: "tiny.gguf", threads: 1, contextSize: 8192, seed: 5, gpu: false })`,
      `const result = await Effect.runPromise(Runner.run({ goal: "echo something", options: { maxIterations: 2 } }).pipe(`,
      `  Effect.provide(Layer.mergeAll(model, ToolRegistry.layer([Tool.echo]), StateStore.layerMemory))))`,
      `console.log("ended", result.status, result.reason, result.iterations)`
    ].join("\n")
    writeFileSync(join(app.dir, "local-model.mjs"), script)
    const { stderr, stdout } = yield* node(["local-model.mjs"], app.dir)
    expect(stdout).toMatch(/^ended terminated (done|max_iterations|malformed_output) [12]$/m)
    expect(stderr).not.toMatch(/llama|ggml/)
  })

/** A file that imports every package, so `tsc` checks their declarations against the installed peers. */
const allPackages = (packages: ReadonlyArray<Packed>) => {
  const names = packages.map((p) => p.manifest.name)
  return [
    ...names.map((name, i) => `import * as p${i} from "${name}"`),
    `export const all = [${names.map((_, i) => `p${i}`).join(", ")}] as const`,
    ``
  ].join("\n")
}

// ---------------------------------------------------------------------------------------------

describe("rx installed from its tarballs", () => {
  beforeAll(async () => {
    mkdirSync(cache, { recursive: true })
    work = mkdtempSync(join(tmpdir(), "rx-consumer-"))
    packed = await Effect.runPromise(pack)
  })
  afterAll(() => {
    if (work !== "") rmSync(work, { recursive: true, force: true })
  })

  it("packs every public package, as it would be published", () => {
    const published = ["packages", "examples"]
      .flatMap((parent) => readdirSync(join(root, parent)).map((name) => join(root, parent, name)))
      .filter((dir) => existsSync(join(dir, "package.json")) && manifestAt(dir).private !== true)
      .map((dir) => manifestAt(dir).name)
    expect(packed.map((p) => p.manifest.name).sort()).toEqual(published.sort())
    expect(published).toContain("@rx/kernel")
    const changesets = readJson(join(root, ".changeset", "config.json")) as { access?: string }
    expect(changesets.access).toBe("public")
    for (const p of packed) {
      const m = p.manifest
      const where = `${m.name} (${relative(root, p.file)})`
      for (const file of ["package.json", "README.md", "LICENSE", "CHANGELOG.md"]) {
        expect(p.entries, `${where} lacks ${file}`).toContain(`package/${file}`)
      }
      for (const bin of Object.values(m.bin ?? {})) expect(p.entries, `${where} lacks its bin`).toContain(`package/${bin.replace(/^\.\//, "")}`)
      expect(m.license).toBe("MIT")
      expect(m.publishConfig?.access, where).toBe("public")
      expect(m.repository?.url, where).toBeDefined()
      expect(m.repository?.directory, where).toBe(relative(root, p.dir))
      expect(m.homepage, where).toBeDefined()
      expect(m.keywords?.length ?? 0, where).toBeGreaterThan(0)
      const ranges = { ...m.dependencies, ...m.peerDependencies }
      for (const [name, range] of Object.entries(ranges)) {
        expect(range.startsWith("workspace:"), `${where}: ${name} "${range}" did not survive packing`).toBe(false)
      }
    }
  })

  it("each package declares what it imports, and nothing more; Effect only as peers", () => {
    const builtins = new Set(builtinModules)
    const bare = (specifier: string) => {
      if (specifier.startsWith(".") || specifier.startsWith("node:") || builtins.has(specifier)) return undefined
      const parts = specifier.split("/")
      return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
    }
    const importsOf = (text: string) =>
      // Not a `require("...")` inside a string (code a bundled library generates, such as Ajv's).
      [...text.matchAll(/\bfrom\s+"([^"]+)"|\bimport\s+"([^"]+)"|(?<!['"`])\b(?:import|require)\(\s*"([^"]+)"\s*\)/g)]
        .map((m) => bare(m[1] ?? m[2] ?? m[3] ?? "."))
        .filter((name) => name === undefined || /^(@[a-z0-9][\w.-]*\/)?[a-z0-9][\w.-]*$/.test(name))
    const sources = (path: string): ReadonlyArray<string> =>
      readdirSync(path).flatMap((name) => {
        const child = join(path, name)
        return statSync(child).isDirectory() ? sources(child) : name.endsWith(".ts") ? [child] : []
      })
    for (const p of packed) {
      const m = manifestAt(p.dir)
      // A bundled bin's code spans it and the chunks it loads (`<bin>-chunks/` beside it).
      const chunks = (bin: string) => {
        const dir = join(p.dir, bin.replace(/\.m?js$/, "-chunks"))
        return existsSync(dir) ? readdirSync(dir).map((name) => join(dir, name)) : []
      }
      const files = [...sources(join(p.dir, "src")), ...Object.values(m.bin ?? {}).flatMap((bin) => [join(p.dir, bin), ...chunks(bin)])]
      const imported = new Set(files.flatMap((file) => importsOf(readFileSync(file, "utf8"))).filter((n) => n !== undefined))
      // `@types/*` dependencies are never imported: they type what a dependency's declarations refer to.
      const declared = new Set([...Object.keys(m.dependencies ?? {}).filter((name) => !name.startsWith("@types/")), ...Object.keys(m.peerDependencies ?? {})])
      expect([...declared].sort(), `${m.name}: dependencies + peerDependencies vs what src/ (and its bin) import`).toEqual([...imported].sort())
      for (const name of Object.keys(m.dependencies ?? {})) {
        expect(name === "effect" || name.startsWith("@effect/"), `${m.name}: ${name} belongs in peerDependencies`).toBe(false)
      }
      for (const [name, range] of Object.entries(m.peerDependencies ?? {})) {
        // A peer from this workspace (@rx/llama for @rx/cli) is its own version, fixed at packing.
        if (range.startsWith("workspace:")) continue
        const exact = m.devDependencies?.[name]
        const v = exact === undefined ? undefined : parse(exact)
        const floor = caretFloor(range)
        expect(v !== undefined && floor !== undefined && satisfies(v, floor), `${m.name}: peer ${name} "${range}" needs an exact devDependency inside it (${exact})`).toBe(true)
      }
    }
  })

  it("the README lists each package's peer ranges", () => {
    const text = section("Use rx in your app")
    for (const p of packed) {
      const row = text.split("\n").find((line) => line.startsWith(`| \`${p.manifest.name}\` |`))
      expect(row, `README.md "Use rx in your app" has no row for ${p.manifest.name}`).toBeDefined()
      const listed = [...(row as string).matchAll(/`((?:@effect\/[a-z-]+|effect|node-llama-cpp|@rx\/[a-z-]+)) ([^`]+)`/g)].map((m) => `${m[1]} ${m[2]}`).sort()
      const actual = Object.entries(p.manifest.peerDependencies ?? {}).map(([n, r]) => `${n} ${r}`).sort()
      expect(listed, `README.md's peers of ${p.manifest.name}`).toEqual(actual)
    }
  })

  const all = () => packed
  const types = () => [...new Set(packed.flatMap((p) => Object.keys(manifestAt(p.dir).devDependencies ?? {}).filter((d) => d.startsWith("@types/"))))]

  it.live("every package, lowest peers: installs, the sources and the example compile, it runs", () =>
    Effect.gen(function*() {
      const app = yield* makeApp("all-lowest", all(), "lowest", {
        dev: ["typescript", "@types/node", ...types()],
        files: { "all.ts": allPackages(all()) },
        ignoreScripts: true,
        llamaCpuOnly: true
      })
      yield* compileAndRun(app)
      yield* loadAll(app, all())
      yield* runLocalModel(app)
      yield* compileSources(app, all(), ["node"])
    }))

  it.live("every package, highest peers: installs, compiles, runs, and the README's test passes", () =>
    Effect.gen(function*() {
      // @rx/llama and node-llama-cpp (700 MB installed, with its GPU builds) only in the lowest app,
      // which runs a goal on the tiny model; @rx/llama's declarations need only effect and @rx/kernel.
      const packages = all().filter((p) => p.manifest.name !== "@rx/llama")
      const app = yield* makeApp("all-highest", packages, "highest", {
        dev: ["typescript", "@types/node", "vitest", "@effect/vitest"],
        files: { "all.ts": allPackages(packages), "main.test.ts": testExample(), "eval.test.ts": evalExample() },
        ignoreScripts: true,
        without: ["node-llama-cpp"]
      })
      yield* compileAndRun(app)
      yield* loadAll(app, packages)
      const { stdout } = yield* run(join(app.dir, "node_modules", ".bin", "vitest"), ["run", "main.test.ts", "eval.test.ts"], app.dir, userEnv())
      expect(stdout).toMatch(/Test Files\s+2 passed/)
    }))

  for (const pick of ["lowest", "highest"] as const) {
    it.live(`@rx/kernel alone, ${pick} effect: no native addon, no install script; compiles and runs`, () =>
      Effect.gen(function*() {
        // The kernel's one dependency: the model formats' decoder, which needs effect alone too.
        const kernel = [pkg("@rx/kernel"), pkg("@rx/formats")]
        const app = yield* makeApp(`kernel-${pick}`, kernel, pick, { dev: ["typescript"], ignoreScripts: false })
        expect(existsSync(join(app.dir, "node_modules", "better-sqlite3"))).toBe(false)
        expect(nativeOrScripted(app.dir)).toEqual([])
        yield* compileAndRun(app)
        if (pick === "lowest") yield* compileSources(app, kernel, [])
      }))
  }
})
