package wire

// The environment a host starts a plugin with, besides go-plugin's own
// variables: both sides read these names.

// TransportCertEnv names the environment variable in which a kiln host passes
// a plugin the certificate and private key (PEM) it serves its connection
// with. The host issued them for this start alone, signed by the host's own
// key, whose certificate go-plugin's PLUGIN_CLIENT_CERT carries; the plugin
// then accepts only connections that present the host's certificate. See
// docs/design.md, "Plugin transport authentication".
const TransportCertEnv = "KILN_PLUGIN_TLS"

// HostPIDEnv names the environment variable in which a host passes its process
// id to the plugins it starts. A plugin watches that process from the moment
// the pluginapi package is initialised, before its main runs, and exits when
// it is gone.
const HostPIDEnv = "KILN_HOST_PID"
