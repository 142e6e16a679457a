package fakevast

import "context"

// The account's money (README: account). GET /api/v0/users/current answers
// balance 0 and credit 100 until SetCredit; at zero or below vast stops
// every instance ("When your balance reaches zero (or below): Your
// instances are stopped automatically", guides/reference/billing.mdx;
// "stopped automatically, but not destroyed", guides/reference/faq/billing.mdx)
// and, as the create reference allows ("billing issues", 400), refuses
// creates. Which fields vast sets on such an instance is not documented:
// the fake shows actual_status, cur_state and next_state "stopped",
// intended_status "running" (the renter did not ask it), and keeps the
// instances stopped when credit comes back (they stay until destroyed).

// SetCredit sets the account's credit ($); at zero or below every live
// instance is stopped (its process too) and creates are refused.
func (s *Server) SetCredit(ctx context.Context, credit float64) error {
	s.mu.Lock()
	s.noCredit, s.credit = true, credit
	var stop []int64
	if credit <= 0 {
		for id, in := range s.instances {
			if !in.Destroyed && !in.NoCredit {
				in.NoCredit = true
				stop = append(stop, id)
			}
		}
	}
	s.mu.Unlock()
	for _, id := range stop {
		if s.cfg.Backend != nil {
			if err := s.cfg.Backend.Kill(ctx, id); err != nil {
				return err
			}
		}
	}
	return nil
}

// billingRefusal is the text of a create's billing refusal, "" when the
// account may rent: Config.BillingRefusal, or no credit left (the fake's
// text; the reference names none).
func (s *Server) billingRefusal() string {
	if s.cfg.BillingRefusal != "" {
		return s.cfg.BillingRefusal
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.noCredit && s.credit <= 0 {
		return "Insufficient credit: your balance is zero; add credit to rent"
	}
	return ""
}
