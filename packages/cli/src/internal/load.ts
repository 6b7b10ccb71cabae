/**
 * How the bundled `rx` loads its chunks (CommonJS files in `rx-chunks/`, built by
 * scripts/bundle.mjs) with V8's code cache.
 *
 * Each chunk is compiled with `vm.Script` and the code V8 compiled for it in an earlier run, read
 * from the user's cache folder (`$XDG_CACHE_HOME/rx/code-<rx>-<node>-<arch>`, else
 * `~/.cache/rx/...`): a person runs `rx list` dozens of times an hour, and compiling the same
 * megabytes each time is much of its start-up. The cache is made when the process exits, after
 * the command ran, so it holds every function the command called. Node's own compile cache
 * (`module.enableCompileCache`) is made when a file is loaded, before its code runs: it holds the
 * top level, and the functions a command calls are compiled again in every process (`rx list`
 * about 40 ms slower; packages/bench/README.md). The cache is only ever a speed-up: a cache file
 * that is missing, unreadable, corrupt (V8 checks it and rejects what is not its own for this
 * Node and these flags), or a folder that cannot be written leaves a normal compile. A chunk whose
 * cache was missing or rejected, or is a day old, gets a new one when the process exits, written
 * to a temporary file then renamed, so that rx processes running at once never read half a file.
 *
 * A cache entry is named by its chunk's name and a hash of the chunk's content, both fixed by the
 * bundler (`hashes`): V8 checks only the length of the source a cache was made for, and a cache
 * of other code of the same length would run that other code. For the same reason only a file of
 * this user that no one else can write is read.
 */
import { createRequire } from "node:module"
import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { basename, dirname, isAbsolute, join } from "node:path"
import { Script } from "node:vm"

/** The folder of the code cache, or undefined when there is no home to put it in. */
export const cacheFolder = (env: NodeJS.ProcessEnv, version: string): string | undefined => {
  const xdg = env["XDG_CACHE_HOME"]
  let base: string | undefined
  if (xdg !== undefined && isAbsolute(xdg)) base = xdg
  else {
    try {
      const home = homedir()
      if (isAbsolute(home)) base = join(home, ".cache")
    } catch {
      base = undefined
    }
  }
  // The folder names the versions: a cache never meets a Node or an rx it was not made by.
  const safe = (text: string) => text.replace(/[^\w.-]/g, "_")
  return base === undefined ? undefined : join(base, "rx", `code-${safe(version)}-${safe(process.version)}-${process.arch}`)
}

interface Loaded {
  exports: unknown
}

interface Pending {
  readonly script: Script
  readonly target: string
}

const day = 24 * 60 * 60 * 1000

/** Run `f`, ignoring any error (a file another rx removed first, a folder that cannot be read...). */
const quietly = (f: () => void) => {
  try {
    f()
  } catch {
    // Nothing to do: the cache is only a speed-up.
  }
}

/**
 * Keep the cache from growing without end (run when a cache is written, so rarely): in `cache`,
 * drop the entries of chunks this rx does not have (`keep`: another build of the same version)
 * and temporary files a killed process left; beside it, the folders of other rx or Node versions
 * not written to for 30 days, and the compile cache Node kept there for an earlier rx
 * (`v<node>-<arch>-<hash>-<n>` folders), which no rx reads any more.
 */
export const prune = (cache: string, keep: ReadonlySet<string>, now = Date.now()) => {
  quietly(() => {
    for (const name of readdirSync(cache)) {
      const path = join(cache, name)
      if (name.endsWith(".tmp")) {
        quietly(() => {
          if (now - statSync(path).mtimeMs > day) unlinkSync(path)
        })
      } else if (!keep.has(name)) quietly(() => unlinkSync(path))
    }
  })
  quietly(() => {
    const parent = dirname(cache)
    for (const name of readdirSync(parent)) {
      const path = join(parent, name)
      if (/^v\d+\.\d+\.\d+-/.test(name)) quietly(() => rmSync(path, { recursive: true, force: true }))
      else if (name.startsWith("code-") && path !== cache) {
        quietly(() => {
          if (now - statSync(path).mtimeMs > 30 * day) rmSync(path, { recursive: true, force: true })
        })
      }
    }
  })
}

/**
 * A cache file's content, if it is a file of this user that no one else can write: V8 checks that
 * a cache was made by this Node for a source of this length, not what its code does, so a cache
 * another user could write (`XDG_CACHE_HOME` in a shared folder) would run their code as this
 * user. Checked on the open file, so it cannot be swapped in between.
 */
const readCache = (path: string): { readonly data: Buffer; readonly mtimeMs: number } | undefined => {
  let fd: number | undefined
  try {
    fd = openSync(path, "r")
    const stat = fstatSync(fd)
    const uid = typeof process.getuid === "function" ? process.getuid() : undefined
    if (!stat.isFile() || (uid !== undefined && stat.uid !== uid) || (stat.mode & 0o022) !== 0) return undefined
    return { data: readFileSync(fd), mtimeMs: stat.mtimeMs }
  } catch {
    return undefined
  } finally {
    const opened = fd
    if (opened !== undefined) quietly(() => closeSync(opened))
  }
}

/** A `require` for the chunks, with `rx.import` for the ES modules they load (node-llama-cpp). */
type ChunkRequire = NodeJS.Require & { rx: { import: (specifier: string) => Promise<unknown> } }

/**
 * A loader of the chunks: `load(file)` runs a chunk (once) and returns its exports. `hashes`: the
 * hash of each chunk's content, by file name (a chunk not in it is compiled with no cache).
 * `importer` loads an ES module by name (a vm.Script compiled without a loader of its own cannot
 * run `import()`).
 */
export const makeLoader = (options: {
  readonly cache: string | undefined
  readonly hashes: Readonly<Record<string, string>>
  readonly importer: (specifier: string) => Promise<unknown>
}) => {
  const modules = new Map<string, Loaded>()
  // One `require` for outside packages per folder (the chunks share one).
  const requires = new Map<string, NodeJS.Require>()
  const outsideRequire = (folder: string, file: string) => {
    const known = requires.get(folder)
    if (known !== undefined) return known
    const made = createRequire(file)
    requires.set(folder, made)
    return made
  }
  const pending: Array<Pending> = []
  let hooked = false

  const entryOf = (name: string) => {
    const hash = Object.hasOwn(options.hashes, name) ? options.hashes[name] : undefined
    return hash === undefined ? undefined : `${name}.${hash}.v8`
  }
  const cacheFile = (file: string) => {
    const entry = entryOf(basename(file))
    return options.cache === undefined || entry === undefined ? undefined : join(options.cache, entry)
  }

  /** Write the cache of every chunk that had none, a rejected one or a day-old one; never fails. */
  const save = () => {
    const written = pending.splice(0)
    for (const { script, target } of written) {
      let temporary: string | undefined
      try {
        mkdirSync(dirname(target), { recursive: true, mode: 0o700 })
        temporary = `${target}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`
        writeFileSync(temporary, script.createCachedData(), { mode: 0o600 })
        renameSync(temporary, target)
        temporary = undefined
      } catch {
        // Unwritable folder, full disk...: the next run compiles again.
      } finally {
        if (temporary !== undefined) {
          try {
            unlinkSync(temporary)
          } catch {
            // Gone already.
          }
        }
      }
    }
    if (written.length > 0 && options.cache !== undefined) {
      const keep = new Set(Object.keys(options.hashes).flatMap((name) => entryOf(name) ?? []))
      prune(options.cache, keep)
    }
  }

  const load = (file: string): unknown => {
    const known = modules.get(file)
    if (known !== undefined) return known.exports
    const source = readFileSync(file, "utf8")
    const target = cacheFile(file)
    const cached = target === undefined ? undefined : readCache(target)
    const wrapped = `(function (exports, require, module, __filename, __dirname) { ${source}\n});`
    const script = new Script(wrapped, cached === undefined ? { filename: file } : { filename: file, cachedData: cached.data })
    // An entry taken is remade after the command at most once a day: it then also holds what this
    // command called, so the cache follows the commands a person runs, not only the first one
    // (a cache made by `rx --help` holds little of what `rx list` runs). A time ahead of the clock
    // (a clock set back, a copied folder) counts as old too, so that it cannot keep an entry forever.
    const stale = cached !== undefined && Math.abs(Date.now() - cached.mtimeMs) > day
    if (target !== undefined && (cached === undefined || script.cachedDataRejected === true || stale)) {
      pending.push({ script, target })
      if (!hooked) {
        hooked = true
        process.once("exit", save)
      }
    }
    const module: Loaded = { exports: {} }
    modules.set(file, module)
    const folder = dirname(file)
    const outside = outsideRequire(folder, file)
    const require = Object.assign(
      (specifier: string): unknown =>
        specifier.startsWith("./") && specifier.endsWith(".cjs") ? load(join(folder, specifier)) : outside(specifier),
      outside,
      { rx: { import: options.importer } }
    ) satisfies ChunkRequire
    const run: unknown = script.runInThisContext()
    if (typeof run === "function") run.call(module.exports, module.exports, require, module, file, folder)
    return module.exports
  }

  return { load, save }
}
