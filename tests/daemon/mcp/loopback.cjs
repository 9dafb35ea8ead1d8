// Preloaded into the everything server in streamable HTTP mode (node --require):
// it calls app.listen(PORT), which listens on every interface; this makes it listen on
// 127.0.0.1 only, and prints the port it got (PORT=0 picks a free one) on stderr.
const net = require("node:net");
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const port = args[0];
  if (typeof port === "number" || (typeof port === "string" && /^\d+$/.test(port))) {
    if (typeof args[1] !== "string") args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => process.stderr.write(`roost-test: listening on port ${this.address().port}\n`));
  return listen.apply(this, args);
};
