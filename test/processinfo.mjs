// First in every test process: package.json's tap `test-env` sets NODE_OPTIONS to this file, then tap's process-info
// hook, then test/typescript.mjs (node runs NODE_OPTIONS' imports before those tap passes as arguments).
// The hook records every module a test loads, reading each a second time and parsing the source map it names;
// node_modules, whose coverage tap never reports, is left out of that record, here and in every process started from
// here (they inherit the variable). The hook must still record a module before tap's mock hook loads, or it never
// writes the process's coverage: test/typescript.mjs, loaded right after it, is that module.
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = String(/(^(node|tapmock):|[\\/](\.tap|tap-snapshots|node_modules)[\\/])/)

// Out of NODE_OPTIONS again: a child started in another folder would not find them by these names (the hook adds
// itself back, by its path, to every child's NODE_OPTIONS).
const ours = new Set([
  '--import=./test/processinfo.mjs',
  '--import=@tapjs/processinfo/import',
  '--import=./test/typescript.mjs',
])
process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS?.match(/"(?:[^"\\]|\\.)*"|\S+/g) ?? [])
  .filter((option) => !ours.has(option.replace(/^"(.*)"$/, '$1')))
  .join(' ')
