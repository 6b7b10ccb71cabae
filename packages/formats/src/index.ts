/**
 * @rx/formats: what local models send instead of clean tool calls, read deterministically:
 * their families' own tool-call formats, and only the calls they mean.
 */
export * as Repair from "./Repair.js"
