package e2e

import "github.com/rayvast/rayvast/head/provider"

func providerRequest(candidateID string, env map[string]string) provider.RentRequest {
	return provider.RentRequest{CandidateID: candidateID, NodeType: safeType, Env: env, Command: suite.bootCode}
}
