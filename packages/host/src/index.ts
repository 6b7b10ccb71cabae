/**
 * @rx/host: between rx's transports and its command line. `Settings` (each setting and where it
 * comes from), `Setup` (settings resolved, recorded with a goal, and made into Layers), `Log`
 * (the log a setting names, as a Layer), `Goals` (one service over a local log or an rx serve).
 */
export * as Eval from "./Eval.js"
export * as Fork from "./Fork.js"
export * as Goals from "./Goals.js"
export * as Log from "./Log.js"
export * as Notes from "./Notes.js"
export * as Serve from "./Serve.js"
export * as Settings from "./Settings.js"
export * as Setup from "./Setup.js"
export * as Version from "./Version.js"
