// Loaded first in every test process (package.json's tap `test-env` puts it in NODE_OPTIONS, which node runs before
// the --import hooks tap passes as arguments). tap's process-info hook records every module a test loads, reading each
// a second time and parsing the source map it names; node_modules, whose coverage tap never reports, is left out of
// that record, in the test process and in every process it starts (they inherit the variable).
process.env._TAPJS_PROCESSINFO_EXCLUDE_ = String(/(^(node|tapmock):|[\\/](\.tap|tap-snapshots|node_modules)[\\/])/)
// Out of NODE_OPTIONS again: a child started in another folder would not find this file by its relative path.
process.env.NODE_OPTIONS = (process.env.NODE_OPTIONS ?? '').replace(
  /(^|\s)"?--import=\.\/test\/processinfo\.mjs"?(?=\s|$)/,
  '',
)
