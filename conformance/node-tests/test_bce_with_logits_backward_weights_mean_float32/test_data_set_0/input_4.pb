B
pos_weightJÜQ?]÷ @C<@×»@S½@